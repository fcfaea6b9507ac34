// `run()`, from the installed package.

import assert from "node:assert/strict";
import { test } from "node:test";
import { CalledProcessError, run } from "quietus";
import { leftAfter, marker } from "./support.mjs";

test("run() of a hanging command returns its outcome and diagnosis", async () => {
  const word = marker();
  const result = await run(["sh", "-c", "echo working; sleep 60", word], { idleTimeoutMs: 2000 });
  assert.equal(result.exitCode, 124);
  assert.equal(result.outcome, "idle_timeout");
  assert.equal(result.diagnosis?.kind, "waiting_on_child");
  assert.match(result.diagnosis?.summary ?? "", /^waiting on a child — sh \(pid \d+\)/);
  assert.equal(result.stdout.toString(), "working\n");
  assert.equal(result.report.idleTimeoutMs, 2000);
  // (Read loosely: a schema may leave the report's details undeclared.)
  assert.deepEqual((result.report as { ladder?: { signalsSent?: unknown } }).ladder?.signalsSent, ["TERM"]);
  assert.deepEqual(await leftAfter(word), []);
});

test("run() does not wait for a grandchild that holds the pipes, and ends it", async () => {
  // execFile would wait for `sleep` (it holds the output pipe) for 60 s.
  const word = marker();
  const result = await run(["bash", "-c", `sleep 60 & echo started`, word], { idleTimeoutMs: 30_000 });
  assert.equal(result.outcome, "exited");
  assert.equal(result.exitCode, 0);
  assert.equal(result.stdout.toString(), "started\n");
  assert.equal(result.report.leftoversKilled, 1);
  assert.deepEqual(await leftAfter(word), []);
});

test("run() passes input, keeps head and tail, and says the exit code", async () => {
  const result = await run(["python3", "-c", "import sys; d = sys.stdin.read(); print(d.upper() * 1000); sys.exit(3)"], {
    input: "ab",
    maxBuffer: 100,
  });
  assert.equal(result.exitCode, 3);
  assert.equal(result.outcome, "exited");
  assert.equal(result.diagnosis, null);
  assert.equal(result.stdout.length, 100);
  assert.equal(result.stdoutOmitted, 2001 - 100);
  assert.equal(result.stdout.toString(), "AB".repeat(50).slice(0, 50) + ("AB".repeat(1000) + "\n").slice(-50));
});

test("run({pty: true}) runs the command on a terminal of the size asked", async () => {
  const result = await run(["sh", "-c", "tty; stty size"], { pty: true, ptySize: { rows: 33, cols: 99 } });
  assert.equal(result.exitCode, 0, result.stderr.toString());
  assert.match(result.stdout.toString(), /^\/dev\/pts\/\d+\r?\n33 99\r?\n$/);
});

test("run({check: true}) rejects with the diagnosis", async () => {
  await assert.rejects(run(["sh", "-c", "sleep 60"], { idleTimeoutMs: 1000, check: true }), (e: unknown) => {
    assert.ok(e instanceof CalledProcessError);
    assert.equal(e.result.exitCode, 124);
    assert.match(e.message, /exited with status 124 \(outcome idle_timeout\); diagnosis: /);
    return true;
  });
});

test("run() with an AbortSignal ends the tree, then rejects with its reason", async () => {
  const word = marker();
  const controller = new AbortController();
  const pending = run(["bash", "-c", "sleep 60", word], { idleTimeoutMs: 60_000, signal: controller.signal });
  setTimeout(() => controller.abort(new Error("given up")), 500);
  await assert.rejects(pending, /given up/);
  assert.deepEqual(await leftAfter(word), []);
});

test("run() rejects bad arguments before running anything", async () => {
  await assert.rejects(run([]), TypeError);
  await assert.rejects(run(["true"], { idleTimeoutMs: -1 }), RangeError);
});
