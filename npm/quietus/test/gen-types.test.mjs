// The generator of src/protocol.ts: the checked-in file is what the schema gives, and the
// generator types what it reads and rejects what it cannot type. Runs in the source tree.

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { SchemaError, generate } from "../scripts/gen-types.mjs";

const packageDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const script = path.join(packageDir, "scripts", "gen-types.mjs");

/** The schema the package's scripts name (package.json's check-types). */
function schemaPath() {
  const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8"));
  const words = pkg.scripts["check-types"].split(/\s+/);
  return path.resolve(packageDir, words[words.length - 1]);
}

test("src/protocol.ts is up to date with the schema", () => {
  const result = spawnSync(process.execPath, [script, "--check", schemaPath()], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
});

test("--check fails when the generated file is out of date", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gen-types-"));
  try {
    const out = path.join(dir, "protocol.ts");
    execFileSync(process.execPath, [script, schemaPath(), out]);
    assert.equal(spawnSync(process.execPath, [script, "--check", schemaPath(), out]).status, 0);
    fs.appendFileSync(out, "export type HandWritten = 1;\n");
    const stale = spawnSync(process.execPath, [script, "--check", schemaPath(), out], { encoding: "utf8" });
    assert.equal(stale.status, 1);
    assert.match(stale.stderr, /is out of date with .*: run `npm run gen-types`/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

const base = (defs, methods = {}, notifications = {}) => ({
  title: "t", version: "9.9.9", methods, notifications,
  errors: { codes: { oops: -1 }, kinds: ["k"] }, $defs: defs,
});

test("types: objects, optional fields, nullables, enums, unions, arrays, maps", () => {
  const text = generate(base({
    Color: { enum: ["red", "green"] },
    Thing: {
      type: "object", description: "A thing.",
      properties: {
        name: { type: "string" }, size: { type: ["integer", "null"] }, color: { $ref: "#/$defs/Color" },
        tags: { type: "array", items: { type: "string" } }, env: { type: "object", additionalProperties: { type: "string" } },
        "odd-name": { const: false }, either: { oneOf: [{ const: "force" }, { type: "object", properties: { n: { type: "number" } }, required: ["n"] }] },
      },
      required: ["name", "size"], additionalProperties: false,
    },
  }, { "a/b": { params: { $ref: "#/$defs/Thing" }, result: { $ref: "#/$defs/Color" } } }, { "a/n": { params: { $ref: "#/$defs/Thing" } } }));
  assert.match(text, /export const ColorValues = \["red", "green"\] as const;\nexport type Color = \(typeof ColorValues\)\[number\];/);
  assert.match(text, /\/\*\* A thing\. \*\/\nexport interface Thing \{\n  name: string;\n  size: number \| null;\n  color\?: Color;\n  tags\?: string\[\];\n  env\?: Record<string, string>;\n  "odd-name"\?: false;\n  either\?: "force" \| \{\n    n: number;\n  \};\n\}/);
  assert.match(text, /"a\/b": \{\n    params: Thing;\n    result: Color;\n  \};/);
  assert.match(text, /export interface Notifications \{\n  "a\/n": Thing;\n\}/);
  assert.match(text, /export const ErrorCodes = \{\n  oops: -1,\n\} as const;/);
  assert.match(text, /export const SpawnErrorKinds = \["k"\] as const;/);
  assert.match(text, /export const PROTOCOL_VERSION = "9\.9\.9";/);
});

test("a union of objects is a type, not an interface", () => {
  const text = generate(base({
    Either: { oneOf: [{ type: "object", properties: { a: { const: true } }, required: ["a"] }, { type: "object", properties: { b: { type: "string" } } }] },
  }));
  assert.match(text, /export type Either = \{\n  a: true;\n\} \| \{\n  b\?: string;\n\};\n/);
});

test("constraints that TypeScript cannot say leave the type as declared", () => {
  const text = generate(base({
    Kind: { type: "string", enum: ["a", "b"] },
    Write: {
      type: "object", properties: { id: { type: "string" }, data: { type: "string" }, text: { type: "string" } },
      required: ["id"], oneOf: [{ required: ["data"] }, { required: ["text"] }], not: { required: ["data", "text"] },
      additionalProperties: false,
    },
  }));
  assert.match(text, /export const KindValues = \["a", "b"\] as const;/);
  assert.match(text, /export interface Write \{\n  id: string;\n  data\?: string;\n  text\?: string;\n\}/);
});

test("what it cannot type is an error naming the place", () => {
  const cases = [
    [base({ A: { $ref: "#/$defs/Missing" } }), /\$defs\.A: \$ref to Missing, which \$defs does not define/],
    [base({ A: { type: "object", properties: { x: { if: {} } } } }), /\$defs\.A\.properties\.x: the keyword "if" is not supported/],
    [base({ A: { type: "strng" } }), /\$defs\.A\.type: "strng" is not a JSON Schema type/],
    [base({ A: { type: "object", properties: {}, required: ["x"] } }), /\$defs\.A\.required: "x" is required but not among the properties/],
    [base({}, { m: { params: { type: "object" } } }), /methods\."m": no result/],
    [{ ...base({}), version: 2 }, /version: missing or not a string/],
    [base({ Methods: { type: "string" } }), /\$defs\.Methods: the name Methods is taken/],
    [base({ Color: { enum: ["a"] }, ColorValues: { type: "string" } }), /\$defs\.ColorValues: the name ColorValues is taken/],
  ];
  for (const [schema, message] of cases) {
    assert.throws(() => generate(schema), (e) => e instanceof SchemaError && message.test(e.message));
  }
});

test("the command line: usage, unreadable schema", () => {
  const usage = spawnSync(process.execPath, [script], { encoding: "utf8" });
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /^usage: gen-types\.mjs \[--check\] SCHEMA \[OUT\]/);
  const missing = spawnSync(process.execPath, [script, "/nonexistent.json", "/dev/null"], { encoding: "utf8" });
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /cannot read the schema \/nonexistent\.json/);
});
