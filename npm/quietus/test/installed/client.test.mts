// `Client`: every method of `quietus serve`, from the installed package.

import assert from "node:assert/strict";
import { after, test } from "node:test";
import {
  Client,
  ClientClosed,
  InvalidParams,
  ProcessIdTaken,
  type ProcessEvent,
  RpcError,
  ServerDied,
  SpawnFailed,
  StdinClosed,
  TooManyProcesses,
  UnknownProcess,
  Unsupported,
  protocol,
} from "quietus";
import { Recorder, protocol as schema } from "./schema.mjs";
import { holders, leftAfter, marker, start, until } from "./support.mjs";

// Every message of the suite's client is checked against the protocol's schema at the end.
const recorder = new Recorder();
const client = new Client({ shutdownGraceMs: 1000, trace: recorder.trace });
after(() => client.close());

async function collect(events: AsyncIterable<ProcessEvent>): Promise<ProcessEvent[]> {
  const all: ProcessEvent[] = [];
  for await (const e of events) all.push(e);
  return all;
}

test("initialize answers with the server's name and capabilities", async () => {
  const info = await client.ready;
  assert.equal(info.serverInfo.name, "quietus");
  assert.equal(info.capabilities.encoding, "base64");
  assert.match(info.serverInfo.version, /^\d+\.\d+\.\d+/);
});

test("write, closeStdin, events in order, wait", async () => {
  const proc = await client.start(["sh", "-c", 'read a; read b; echo "got $a $b"; echo oops >&2; exit 4'], {
    stdin: true,
    idleTimeoutMs: 60_000,
    context: { runId: "r7" },
  });
  assert.ok(proc.pid > 0);
  await proc.write("one\n");
  await proc.write(Buffer.from("two\n"));
  await proc.closeStdin();
  await assert.rejects(proc.write("late\n"), StdinClosed);
  const events = await collect(proc.events());
  const methods = events.map((e) => e.method);
  assert.equal(methods[0], "process/started");
  assert.equal(methods.at(-1), "process/closed");
  assert.equal(methods.filter((m) => m === "process/exited").length, 1);
  assert.ok(methods.indexOf("process/exited") < methods.length - 1);
  for (const e of events) assert.deepEqual(e.context, { runId: "r7" });
  const stdout = Buffer.concat(events.flatMap((e) => (e.method === "process/output" && e.stream === "stdout" ? [e.bytes] : []))).toString();
  assert.equal(stdout, "got one two\n");
  const exited = events.find((e) => e.method === "process/exited");
  assert.ok(exited?.method === "process/exited");
  assert.equal(exited.exitCode, 4);
  assert.equal(exited.outcome, "exited");
  const report = await proc.wait();
  assert.equal(report.exitCode, 4);
  assert.equal(report.processId, proc.processId);
  assert.equal((report as { bytes?: { stdout?: unknown } }).bytes?.stdout, 12);
  const snap = await proc.snapshot();
  assert.equal(snap.running, false);
  assert.equal(snap.stdout?.toString(), "got one two\n");
  assert.equal(snap.stderr?.toString(), "oops\n");
  assert.equal(snap.terminal, null);
  // An ended process: the actions say so.
  assert.equal(await proc.terminate(), false);
  assert.equal(await proc.kill(), false);
});

test("an idle process is ended with a diagnosis; keepalive and setIdleTimeout steer it", async () => {
  const word = marker();
  const proc = await client.start(["bash", "-c", "sleep 60; echo never", word], { idleTimeoutMs: 60_000 });
  assert.equal(await proc.wait({ timeoutMs: 10 }), null);
  assert.equal(await proc.keepalive(), true);
  assert.equal(await proc.keepalive(30_000), true);
  assert.equal(await proc.setIdleTimeout(1500), true);
  const report = await proc.wait();
  assert.equal(report.outcome, "idle_timeout");
  assert.equal(report.exitCode, 124);
  assert.equal(report.idleTimeoutMs, 1500);
  assert.equal(report.diagnosis?.kind, "waiting_on_child");
  assert.deepEqual(await leftAfter(word), []);
});

test("interrupt, terminate and kill reach the tree", async () => {
  const word = marker();
  const trap = (n: number) => ["bash", "-c", `trap 'echo got INT; exit ${n}' INT; echo ready; while :; do sleep 0.1; done`, word];
  const a = await client.start(trap(3));
  const aEvents = a.events();
  for (;;) {
    const { value } = await aEvents.next();
    if (value?.method === "process/output" && value.bytes.toString().includes("ready")) break;
  }
  assert.equal(await a.interrupt(), true);
  const aReport = await a.wait();
  assert.equal(aReport.exitCode, 3);
  const b = await client.start(["bash", "-c", "sleep 60", word]);
  assert.equal(await b.terminate({ graceMs: 500 }), true);
  assert.equal((await b.wait()).outcome, "terminated");
  const c = await client.start(["bash", "-c", "trap '' TERM; sleep 60", word]);
  assert.equal(await c.kill(), true);
  assert.equal((await c.wait()).signal, 9);
  assert.deepEqual(await leftAfter(word), []);
});

test("resize: a terminal's size changes; a pipe process has none", async () => {
  const proc = await client.start(["sh", "-c", "read x; stty size"], { pty: { rows: 30, cols: 100 } });
  assert.equal(await proc.resize(40, 120), true);
  await proc.write("go\n");
  const report = await proc.wait();
  assert.equal(report.exitCode, 0);
  const snap = await proc.snapshot();
  assert.match(snap.terminal?.toString() ?? "", /40 120/);
  const pipe = await client.start(["sleep", "30"]);
  await assert.rejects(pipe.resize(10, 10), Unsupported);
  await pipe.kill();
});

test("typed errors carry the server's codes and kinds", async () => {
  await assert.rejects(client.start(["/nonexistent/program"]), (e: unknown) => {
    assert.ok(e instanceof SpawnFailed);
    assert.equal(e.code, protocol.ErrorCodes.spawn_failed);
    assert.equal(e.errorName, "spawn_failed");
    assert.equal(e.kind, "not_found");
    return true;
  });
  await assert.rejects(client.start(["true"], { idleTimeoutMs: 0 }), (e: unknown) => {
    assert.ok(e instanceof InvalidParams);
    assert.match(e.message, /idleTimeoutMs/);
    return true;
  });
  const p = await client.start(["true"], { processId: "taken" });
  await p.wait();
  await assert.rejects(client.start(["true"], { processId: "taken" }), ProcessIdTaken);
  await assert.rejects(client.request("process/snapshot", { processId: "nobody" }), (e: unknown) => {
    assert.ok(e instanceof UnknownProcess);
    assert.ok(e instanceof RpcError);
    assert.deepEqual(e.data, { status: "unknown_process" });
    return true;
  });
  assert.throws(() => client.process("nobody"), UnknownProcess);
});

test("the server's limit of live processes: TooManyProcesses", async () => {
  const word = marker();
  const small = new Client({ maxProcesses: 1, shutdownGraceMs: 500 });
  try {
    const first = await small.start(["bash", "-c", "sleep 60", word]);
    await assert.rejects(small.start(["true"]), (e: unknown) => e instanceof TooManyProcesses && e.code === -32002);
    await first.kill();
    await first.wait();
    const second = await small.start(["true"]); // room again
    assert.equal((await second.wait()).exitCode, 0);
  } finally {
    await small.close();
  }
  assert.deepEqual(await leftAfter(word), []);
});

test("a server that dies: pending calls and later ones reject with ServerDied", async () => {
  const word = marker();
  const doomed = new Client({ shutdownGraceMs: 500 });
  const proc = await doomed.start(["bash", "-c", "sleep 60", word]);
  const waiting = proc.wait();
  process.kill(doomed.serverPid as number, "SIGKILL");
  await assert.rejects(waiting, (e: unknown) => e instanceof ServerDied && e.signal === "SIGKILL" && /ended \(signal SIGKILL\)/.test(e.message));
  await assert.rejects(doomed.list(), ServerDied);
  await doomed.close();
  // The server's guardian ends its processes when the server itself is killed.
  assert.deepEqual(await leftAfter(word), []);
});

test("an AbortSignal gives up a wait and an event iteration; the process runs on", async () => {
  const word = marker();
  const proc = await client.start(["bash", "-c", "sleep 60", word]);
  const controller = new AbortController();
  const waiting = proc.wait({ signal: controller.signal });
  const iterating = collect(proc.events({ signal: controller.signal }));
  controller.abort(new Error("enough"));
  await assert.rejects(waiting, /enough/);
  await assert.rejects(iterating, /enough/);
  assert.equal((await client.list()).find((s) => s.processId === proc.processId)?.state, "running");
  await proc.kill();
  assert.deepEqual(await leftAfter(word), []);
});

test("list shows the processes with their state", async () => {
  const proc = await client.start(["sleep", "30"], { processId: `listed-${Date.now()}` });
  const entry = (await client.list()).find((s) => s.processId === proc.processId);
  assert.equal(entry?.pid, proc.pid);
  assert.equal(entry?.state, "running");
  await proc.kill();
});

test("close() ends every process it still runs; calls after it reject", async () => {
  const word = marker();
  const own = new Client({ shutdownGraceMs: 500 });
  await own.start(["bash", "-c", "sleep 60", word]);
  await own.start(["bash", "-c", "trap '' TERM; sleep 60", word]);
  await own.close();
  assert.deepEqual(await leftAfter(word), []);
  await assert.rejects(own.start(["true"]), ClientClosed);
});

test("the end of the Node process ends every process, even without close()", async () => {
  const word = marker();
  const script = `
    const { Client } = require("quietus");
    const client = new Client({ shutdownGraceMs: 500 });
    client.start(["bash", "-c", "sleep 60", process.argv[1]]).then((p) => {
      console.log("started " + p.pid);
      // no close(): Node exits once nothing else waits
    });
  `;
  const done = await start(process.execPath, ["-e", script, word]).done;
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /^started \d+\n$/);
  assert.deepEqual(await leftAfter(word), []);
});

test("a process killed from outside the client: process.exit() with processes running", async () => {
  const word = marker();
  const script = `
    const { Client } = require("quietus");
    const client = new Client();
    client.start(["bash", "-c", "sleep 60", process.argv[1]]).then(() => process.exit(9));
  `;
  const done = await start(process.execPath, ["-e", script, word]).done;
  assert.equal(done.code, 9, done.stderr);
  assert.deepEqual(await leftAfter(word), []);
});

test("a Node process killed with SIGKILL leaves nothing behind either", async () => {
  const word = marker();
  const script = `
    const { Client } = require("quietus");
    const client = new Client({ shutdownGraceMs: 500 });
    client.start(["bash", "-c", "sleep 60", process.argv[1]]).then(() => console.log("started"));
    setInterval(() => {}, 1000); // runs until killed
  `;
  const run = start(process.execPath, ["-e", script, word]);
  await until("started", () => run.out().includes("started"));
  assert.ok(holders(word).length > 0);
  run.child.kill("SIGKILL");
  assert.equal((await run.done).signal, "SIGKILL");
  assert.deepEqual(await leftAfter(word), []);
});

test("many clients: one exit hook, however many servers", async () => {
  const before = process.listenerCount("exit");
  const clients = Array.from({ length: 12 }, () => new Client());
  await Promise.all(clients.map((c) => c.ready));
  assert.ok(process.listenerCount("exit") <= before + 1, `${process.listenerCount("exit")} exit listeners`);
  await Promise.all(clients.map((c) => c.close()));
});

test("an input-wait timeout ends the process, after process/inputWait", async () => {
  const proc = await client.start(["sh", "-c", "read x"], { stdin: true, inputWaitTimeoutMs: 1000, idleTimeoutMs: 60_000 });
  const events = await collect(proc.events());
  const wait = events.find((e) => e.method === "process/inputWait");
  assert.ok(wait?.method === "process/inputWait", JSON.stringify(events.map((e) => e.method)));
  assert.equal(wait.name, "sh");
  assert.ok(wait.waitedMs >= 1000);
  const report = await proc.wait();
  assert.equal(report.outcome, "input_wait");
  assert.equal(report.exitCode, 124);
  assert.equal(report.diagnosis?.kind, "awaiting_input");
});

test("every message of this suite fits the protocol's schema, and each method and notification was seen", () => {
  assert.deepEqual(recorder.errors, []);
  for (const method of Object.keys(schema.methods)) {
    assert.ok(recorder.seen.has(`result ${method}`), `no answer to ${method} was checked`);
  }
  for (const name of Object.keys(schema.notifications)) {
    assert.ok(recorder.seen.has(`notification ${name}`), `no ${name} was checked`);
  }
});
