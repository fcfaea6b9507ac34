#!/usr/bin/env node
// Generates src/protocol.ts, the TypeScript types of the `quietus serve` protocol, from its JSON
// Schema description (what `quietus serve --schema` prints; checked in at docs/serve.schema.json).
// Node only, no dependencies.
//
//   node scripts/gen-types.mjs SCHEMA [OUT]          writes OUT (default: src/protocol.ts)
//   node scripts/gen-types.mjs --check SCHEMA [OUT]  exits 1 when OUT is not what SCHEMA gives
//
// The schema's shape: {"title", "version", "methods": {"<method>": {"params": {"$ref"},
// "result": {"$ref"}}}, "notifications": {"<name>": {"params": {"$ref"}}}, "errors": {"codes":
// {"<name>": <int>}, "kinds": [...]}, "$defs": {...}}. Of JSON Schema it reads $ref (to
// #/$defs/NAME), type (one or a list), enum, const, properties, required,
// additionalProperties, items, oneOf, anyOf, allOf and description; value constraints (ranges,
// formats, `not`, `dependentRequired`, and oneOf/anyOf branches that only list required
// properties) leave the declared type; anything else it does not know in a place that decides a
// type is an error naming the place, never a guess.

import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const packageRoot = path.dirname(here);

/** An error in the schema, naming where it is. */
export class SchemaError extends Error {
  constructor(where, what) {
    super(`${where}: ${what}`);
    this.name = "SchemaError";
  }
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const TYPE_WORDS = new Set(["string", "integer", "number", "boolean", "null", "object", "array"]);
// Keywords that only constrain values (they change no TypeScript type).
// (`not` and `dependentRequired` only narrow what the type allows: the TypeScript type is the
// wider one.)
const VALUE_ONLY = new Set([
  "description", "title", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
  "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems",
  "default", "examples", "$comment", "multipleOf", "deprecated", "readOnly", "writeOnly",
  "minProperties", "maxProperties", "contentEncoding", "contentMediaType", "not", "dependentRequired",
]);

/** A schema that only says which properties are required (a branch of `oneOf: [{required:
 * ["data"]}, {required: ["text"]}]` beside `properties`): a constraint, not a type. */
function requiredOnly(s) {
  return !!s && typeof s === "object" && !Array.isArray(s) && Object.keys(s).every((k) => k === "required" || VALUE_ONLY.has(k));
}
const TYPE_KEYS = new Set([
  "$ref", "type", "enum", "const", "properties", "required", "additionalProperties", "items",
  "oneOf", "anyOf", "allOf",
]);

function key(name) {
  return IDENT.test(name) ? name : JSON.stringify(name);
}

function literal(value, where) {
  if (value === null || ["string", "number", "boolean"].includes(typeof value)) {
    return JSON.stringify(value);
  }
  throw new SchemaError(where, `${JSON.stringify(value)} is not a literal TypeScript can type (string, number, boolean or null)`);
}

function doc(description, indent) {
  if (typeof description !== "string" || description === "") return "";
  const text = description.replace(/\*\//g, "*\\/");
  const lines = text.split("\n");
  if (lines.length === 1) return `${indent}/** ${text} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

function union(parts) {
  const unique = [...new Set(parts)];
  return unique.length === 1 ? unique[0] : unique.map((p) => (p.includes("=>") ? `(${p})` : p)).join(" | ");
}

class Generator {
  constructor(schema, source) {
    this.schema = schema;
    this.source = source;
    this.defs = schema.$defs ?? {};
  }

  refName(ref, where) {
    const match = typeof ref === "string" ? /^#\/\$defs\/([^/]+)$/.exec(ref) : null;
    if (!match) throw new SchemaError(where, `$ref ${JSON.stringify(ref)} is not #/$defs/NAME`);
    const name = match[1];
    if (!Object.hasOwn(this.defs, name)) throw new SchemaError(where, `$ref to ${name}, which $defs does not define`);
    if (!IDENT.test(name)) throw new SchemaError(where, `$defs name ${JSON.stringify(name)} is not a TypeScript identifier`);
    return name;
  }

  /** The TypeScript type of `s`; `indent` is the indentation of the line it starts on. */
  type(s, where, indent = "") {
    if (s === true || (s && typeof s === "object" && Object.keys(s).every((k) => VALUE_ONLY.has(k)))) {
      return "unknown";
    }
    if (s === false) return "never";
    if (!s || typeof s !== "object" || Array.isArray(s)) {
      throw new SchemaError(where, `${JSON.stringify(s)} is not a schema (an object or a boolean)`);
    }
    for (const k of Object.keys(s)) {
      if (!TYPE_KEYS.has(k) && !VALUE_ONLY.has(k) && k !== "$defs" && k !== "$schema" && k !== "$id") {
        throw new SchemaError(where, `the keyword ${JSON.stringify(k)} is not supported by this generator`);
      }
    }
    if (s.$ref !== undefined) return this.refName(s.$ref, where);
    if (s.const !== undefined) return literal(s.const, `${where}.const`);
    if (s.enum !== undefined) {
      if (!Array.isArray(s.enum) || s.enum.length === 0) throw new SchemaError(`${where}.enum`, "must be a non-empty array");
      return union(s.enum.map((v, i) => literal(v, `${where}.enum[${i}]`)));
    }
    for (const combiner of ["oneOf", "anyOf"]) {
      if (s[combiner] !== undefined && (s.properties !== undefined || s.type === "object") && Array.isArray(s[combiner]) && s[combiner].every(requiredOnly)) {
        // Which of the properties are required together: the object's type as declared.
        const { [combiner]: _constraint, ...rest } = s;
        return this.type(rest, where, indent);
      }
      if (s[combiner] !== undefined) {
        if (!Array.isArray(s[combiner]) || s[combiner].length === 0) throw new SchemaError(`${where}.${combiner}`, "must be a non-empty array");
        return union(s[combiner].map((p, i) => this.type(p, `${where}.${combiner}[${i}]`, indent)));
      }
    }
    if (s.allOf !== undefined) {
      if (!Array.isArray(s.allOf) || s.allOf.length === 0) throw new SchemaError(`${where}.allOf`, "must be a non-empty array");
      return s.allOf.map((p, i) => `(${this.type(p, `${where}.allOf[${i}]`, indent)})`).join(" & ");
    }
    let types = s.type;
    if (types === undefined) {
      if (s.properties !== undefined || s.additionalProperties !== undefined) types = "object";
      else if (s.items !== undefined) types = "array";
      else throw new SchemaError(where, "no type, $ref, enum, const or combiner: say what it is");
    }
    const list = Array.isArray(types) ? types : [types];
    return union(list.map((t) => {
      if (!TYPE_WORDS.has(t)) throw new SchemaError(`${where}.type`, `${JSON.stringify(t)} is not a JSON Schema type`);
      switch (t) {
        case "string": return "string";
        case "integer":
        case "number": return "number";
        case "boolean": return "boolean";
        case "null": return "null";
        case "array": return this.array(s, where, indent);
        case "object": return this.object(s, where, indent);
      }
    }));
  }

  array(s, where, indent) {
    if (s.items === undefined) return "unknown[]";
    const item = this.type(s.items, `${where}.items`, indent);
    return /^[A-Za-z0-9_$]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
  }

  object(s, where, indent) {
    const props = s.properties ?? {};
    if (typeof props !== "object" || Array.isArray(props)) throw new SchemaError(`${where}.properties`, "must be an object");
    const required = s.required ?? [];
    if (!Array.isArray(required)) throw new SchemaError(`${where}.required`, "must be an array");
    for (const name of required) {
      if (!Object.hasOwn(props, name)) throw new SchemaError(`${where}.required`, `${JSON.stringify(name)} is required but not among the properties`);
    }
    const extra = s.additionalProperties;
    const names = Object.keys(props);
    if (names.length === 0) {
      if (extra === false) return "Record<string, never>";
      if (extra === undefined || extra === true) return "Record<string, unknown>";
      return `Record<string, ${this.type(extra, `${where}.additionalProperties`, indent)}>`;
    }
    const inner = `${indent}  `;
    let out = "{\n";
    for (const name of names) {
      const p = props[name];
      out += doc(p && typeof p === "object" ? p.description : undefined, inner);
      const optional = required.includes(name) ? "" : "?";
      out += `${inner}${key(name)}${optional}: ${this.type(p, `${where}.properties.${name}`, inner)};\n`;
    }
    if (extra === true) out += `${inner}[key: string]: unknown;\n`;
    else if (extra !== undefined && extra !== false) {
      out += `${inner}[key: string]: ${this.type(extra, `${where}.additionalProperties`, inner)};\n`;
    }
    return `${out}${indent}}`;
  }

  /** One `$defs` entry as a declaration. */
  declaration(name, s) {
    const where = `$defs.${name}`;
    if (!IDENT.test(name)) throw new SchemaError(where, "the name is not a TypeScript identifier");
    let out = doc(s && typeof s === "object" ? s.description : undefined, "");
    if (s && typeof s === "object" && Array.isArray(s.enum) && Object.keys(s).every((k) => k === "enum" || k === "type" || VALUE_ONLY.has(k))) {
      const values = s.enum.map((v, i) => literal(v, `${where}.enum[${i}]`));
      out += `export const ${name}Values = [${values.join(", ")}] as const;\n`;
      out += doc(s.description, "");
      out += `export type ${name} = (typeof ${name}Values)[number];\n`;
      return out;
    }
    const t = this.type(s, where, "");
    const combined = s && typeof s === "object" && ["oneOf", "anyOf", "allOf"].some((k) => s[k] !== undefined && !(Array.isArray(s[k]) && s[k].every(requiredOnly)));
    const single = s && typeof s === "object" && !Array.isArray(s.type);
    if (t.startsWith("{\n") && single && !combined) return `${out}export interface ${name} ${t}\n`;
    return `${out}export type ${name} = ${t};\n`;
  }

  table(section, fields) {
    const table = this.schema[section];
    if (!table || typeof table !== "object" || Array.isArray(table)) {
      throw new SchemaError(section, "missing or not an object of names");
    }
    return Object.entries(table).map(([name, entry]) => {
      const where = `${section}.${JSON.stringify(name)}`;
      if (!entry || typeof entry !== "object") throw new SchemaError(where, "not an object");
      const types = fields.map((f) => {
        if (entry[f] === undefined) throw new SchemaError(where, `no ${f}`);
        return [f, this.type(entry[f], `${where}.${f}`, "    ")];
      });
      return [name, types];
    });
  }

  generate() {
    const s = this.schema;
    if (!s || typeof s !== "object" || Array.isArray(s)) throw new SchemaError("the schema", "not a JSON object");
    if (typeof s.version !== "string") throw new SchemaError("version", "missing or not a string");
    if (!s.$defs || typeof s.$defs !== "object") throw new SchemaError("$defs", "missing or not an object");
    const methods = this.table("methods", ["params", "result"]);
    const notifications = this.table("notifications", ["params"]);
    const errors = s.errors;
    if (!errors || typeof errors !== "object" || !errors.codes || typeof errors.codes !== "object") {
      throw new SchemaError("errors", "missing, or without codes ({\"name\": code})");
    }
    for (const [name, code] of Object.entries(errors.codes)) {
      if (!Number.isInteger(code)) throw new SchemaError(`errors.codes.${name}`, `${JSON.stringify(code)} is not an integer`);
    }
    const kinds = errors.kinds ?? [];
    if (!Array.isArray(kinds) || !kinds.every((k) => typeof k === "string")) {
      throw new SchemaError("errors.kinds", "not an array of strings");
    }

    // The names this file declares besides the $defs: a $defs entry may not take one.
    const own = ["PROTOCOL_VERSION", "Methods", "MethodName", "ParamsOf", "ResultOf", "METHOD_NAMES", "Notifications",
      "NotificationName", "NOTIFICATION_NAMES", "ErrorCodes", "ErrorName", "SpawnErrorKinds", "SpawnErrorKind"];
    const declared = new Set(own);
    for (const [name, def] of Object.entries(s.$defs)) {
      const names = def && typeof def === "object" && Array.isArray(def.enum) ? [name, `${name}Values`] : [name];
      for (const n of names) {
        if (declared.has(n)) throw new SchemaError(`$defs.${name}`, `the name ${n} is taken (by this generator's own declarations or another $defs entry)`);
        declared.add(n);
      }
    }
    let out = "";
    out += `// Generated by scripts/gen-types.mjs from ${this.source}: do not edit.\n`;
    out += `// ${s.title ?? "quietus serve protocol"}, version ${s.version}.\n`;
    out += "/* eslint-disable */\n\n";
    out += "/** The version of the protocol description these types come from. */\n";
    out += `export const PROTOCOL_VERSION = ${JSON.stringify(s.version)};\n\n`;
    for (const [name, def] of Object.entries(s.$defs)) {
      out += this.declaration(name, def) + "\n";
    }
    out += "/** Every method: its parameters and its result. */\n";
    out += "export interface Methods {\n";
    for (const [name, [[, params], [, result]]] of methods) {
      out += `  ${JSON.stringify(name)}: {\n    params: ${params};\n    result: ${result};\n  };\n`;
    }
    out += "}\n\n";
    out += "/** A method's name. */\nexport type MethodName = keyof Methods;\n";
    out += "/** A method's parameters. */\nexport type ParamsOf<M extends MethodName> = Methods[M][\"params\"];\n";
    out += "/** A method's result. */\nexport type ResultOf<M extends MethodName> = Methods[M][\"result\"];\n";
    out += `/** Every method's name. */\nexport const METHOD_NAMES = [${methods.map(([n]) => JSON.stringify(n)).join(", ")}] as const;\n\n`;
    out += "/** Every notification the server sends: its parameters. */\n";
    out += "export interface Notifications {\n";
    for (const [name, [[, params]]] of notifications) {
      out += `  ${JSON.stringify(name)}: ${params};\n`;
    }
    out += "}\n\n";
    out += "/** A notification's name. */\nexport type NotificationName = keyof Notifications;\n";
    out += `/** Every notification's name. */\nexport const NOTIFICATION_NAMES = [${notifications.map(([n]) => JSON.stringify(n)).join(", ")}] as const;\n\n`;
    out += "/** The server's error codes by name. */\nexport const ErrorCodes = {\n";
    for (const [name, code] of Object.entries(errors.codes)) out += `  ${key(name)}: ${code},\n`;
    out += "} as const;\n";
    out += "/** An error code's name. */\nexport type ErrorName = keyof typeof ErrorCodes;\n";
    out += "/** The failed steps of a spawn (`data.kind` of a spawn failure). */\n";
    out += `export const SpawnErrorKinds = [${kinds.map((k) => JSON.stringify(k)).join(", ")}] as const;\n`;
    out += "/** A failed step of a spawn. */\nexport type SpawnErrorKind = (typeof SpawnErrorKinds)[number];\n";
    return out;
  }
}

/** The TypeScript source for `schema` (an object); `source` names it in the header. */
export function generate(schema, source = "the schema") {
  return new Generator(schema, source).generate();
}

function main(argv) {
  const args = argv.slice(2);
  const check = args[0] === "--check";
  if (check) args.shift();
  if (args.length < 1 || args.length > 2 || args[0].startsWith("-")) {
    process.stderr.write("usage: gen-types.mjs [--check] SCHEMA [OUT]\n  SCHEMA: the protocol's JSON Schema (docs/serve.schema.json)\n  OUT: the file to write (default src/protocol.ts of the package)\n");
    return 2;
  }
  const schemaPath = args[0];
  const out = args[1] ?? path.join(packageRoot, "src", "protocol.ts");
  let schema;
  try {
    schema = JSON.parse(readFileSync(schemaPath, "utf8"));
  } catch (e) {
    process.stderr.write(`gen-types: cannot read the schema ${schemaPath}: ${e.message}\n`);
    return 2;
  }
  let text;
  try {
    // The header names the schema by its path from the repository's root when it is inside it.
    const repo = path.resolve(packageRoot, "..", "..");
    const abs = path.resolve(schemaPath);
    const source = abs.startsWith(repo + path.sep) ? path.relative(repo, abs).split(path.sep).join("/") : path.basename(abs);
    text = generate(schema, source);
  } catch (e) {
    if (!(e instanceof SchemaError)) throw e;
    process.stderr.write(`gen-types: ${schemaPath}: ${e.message}\n`);
    return 2;
  }
  if (check) {
    let current = null;
    try {
      current = readFileSync(out, "utf8");
    } catch {
      // missing: out of date
    }
    if (current !== text) {
      process.stderr.write(`gen-types: ${out} is out of date with ${schemaPath}: run \`npm run gen-types\` in npm/quietus\n`);
      return 1;
    }
    return 0;
  }
  writeFileSync(out, text);
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv);
}
