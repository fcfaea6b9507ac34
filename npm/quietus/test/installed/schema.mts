// Checks messages against the protocol's JSON Schema (the one src/protocol.ts is generated
// from, copied here by run.mjs as schema.json): the subset of JSON Schema the generator reads.

import * as fs from "node:fs";
import * as path from "node:path";

type Schema = Record<string, unknown> | boolean;
interface Protocol {
  methods: Record<string, { params: Schema; result: Schema }>;
  notifications: Record<string, { params: Schema }>;
  errors: { codes: Record<string, number>; kinds?: string[] };
  $defs: Record<string, Schema>;
}

export const protocol: Protocol = JSON.parse(fs.readFileSync(path.join(process.cwd(), "test", "schema.json"), "utf8"));

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

/** Where `value` breaks `schema` (empty: it fits). */
export function check(schema: Schema, value: unknown, where = "$"): string[] {
  if (schema === true) return [];
  if (schema === false) return [`${where}: nothing is allowed here`];
  const s = schema as Record<string, unknown>;
  if (typeof s.$ref === "string") {
    const name = s.$ref.replace("#/$defs/", "");
    const def = protocol.$defs[name];
    if (def === undefined) return [`${where}: $ref ${s.$ref} is not defined`];
    return check(def, value, where);
  }
  const errors: string[] = [];
  if (s.const !== undefined && JSON.stringify(s.const) !== JSON.stringify(value)) {
    errors.push(`${where}: ${JSON.stringify(value)} is not ${JSON.stringify(s.const)}`);
  }
  if (Array.isArray(s.enum) && !s.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    errors.push(`${where}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  }
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const t = typeOf(value);
    if (!types.includes(t) && !(t === "integer" && types.includes("number"))) {
      return [...errors, `${where}: a ${t} (${JSON.stringify(value)?.slice(0, 80)}), not ${types.join(" or ")}`];
    }
  }
  for (const combiner of ["oneOf", "anyOf"] as const) {
    const branches = s[combiner];
    if (!Array.isArray(branches)) continue;
    const fits = branches.filter((b) => check(b as Schema, value, where).length === 0).length;
    if (fits === 0 || (combiner === "oneOf" && fits > 1)) {
      errors.push(`${where}: fits ${fits} of the ${combiner} branches: ${branches.map((b) => check(b as Schema, value, where).join("; ")).join(" | ")}`);
    }
  }
  if (Array.isArray(s.allOf)) for (const b of s.allOf) errors.push(...check(b as Schema, value, where));
  if (typeOf(value) === "object") {
    const object = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, Schema>;
    for (const name of (s.required ?? []) as string[]) {
      if (!(name in object)) errors.push(`${where}: ${name} is missing`);
    }
    for (const [name, v] of Object.entries(object)) {
      if (name in props) errors.push(...check(props[name] as Schema, v, `${where}.${name}`));
      else if (s.additionalProperties === false) errors.push(`${where}.${name}: not in the schema`);
      else if (s.additionalProperties && s.additionalProperties !== true) {
        errors.push(...check(s.additionalProperties as Schema, v, `${where}.${name}`));
      }
    }
  }
  if (Array.isArray(value) && s.items !== undefined) {
    value.forEach((item, i) => errors.push(...check(s.items as Schema, item, `${where}[${i}]`)));
  }
  return errors;
}

/** Collects a client's traffic (its `trace` option) and says where it breaks the schema. */
export class Recorder {
  private readonly methods = new Map<unknown, string>();
  readonly errors: string[] = [];
  /** How many messages of each kind were checked. */
  readonly seen = new Map<string, number>();

  readonly trace = (direction: "send" | "receive", message: unknown): void => {
    const m = message as { id?: unknown; method?: string; params?: unknown; result?: unknown; error?: { code?: unknown } };
    const count = (key: string): void => void this.seen.set(key, (this.seen.get(key) ?? 0) + 1);
    if (direction === "send" && m.method) {
      this.methods.set(m.id, m.method);
      const spec = protocol.methods[m.method];
      if (!spec) this.errors.push(`sent ${m.method}: not a method of the schema`);
      else this.errors.push(...check(spec.params, m.params ?? {}, `${m.method} params`));
      count(`request ${m.method}`);
      return;
    }
    if (m.method && m.id === undefined) {
      const spec = protocol.notifications[m.method];
      if (!spec) this.errors.push(`received ${m.method}: not a notification of the schema`);
      else this.errors.push(...check(spec.params, m.params, `${m.method} params`));
      count(`notification ${m.method}`);
      return;
    }
    const method = this.methods.get(m.id);
    if (!method) return;
    if (m.error) {
      if (!Object.values(protocol.errors.codes).includes(m.error.code as number)) {
        this.errors.push(`${method} error: code ${String(m.error.code)} is not in the schema's errors`);
      }
      count(`error ${String(m.error.code)}`);
      return;
    }
    const spec = protocol.methods[method];
    if (spec) this.errors.push(...check(spec.result, m.result, `${method} result`));
    count(`result ${method}`);
  };
}
