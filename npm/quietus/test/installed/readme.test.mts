// The examples of the package's README, compiled with tsc --strict (by run.mjs) and run.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { start } from "./support.mjs";

const folder = path.join(process.cwd(), "build", "examples");
const examples = fs.readdirSync(folder).filter((f) => f.startsWith("readme-") && f.endsWith(".mjs")).sort();

test("the README has its two examples", () => {
  assert.deepEqual(examples, ["readme-1.mjs", "readme-2.mjs"]);
});

test("README example 1: run() of a hanging command", async () => {
  const done = await start(process.execPath, [path.join(folder, "readme-1.mjs")]).done;
  assert.equal(done.code, 0, done.stderr);
  const lines = done.stdout.split("\n");
  assert.deepEqual(lines.slice(0, 3), ["124", "idle_timeout", "waiting_on_child"]);
  assert.match(lines[3] ?? "", /^waiting on a child — sh \(pid \d+\) waits for a child to end \(wait4\)$/);
  assert.equal(lines.slice(4).join("\n"), "working\n\n");
});

test("README example 2: the client", async () => {
  const done = await start(process.execPath, [path.join(folder, "readme-2.mjs")]).done;
  assert.equal(done.code, 0, done.stderr);
  assert.equal(done.stdout, "hello, reader\nprocess/started process/closed\nexited 0\nProcessIdTaken\ntrue\n");
});
