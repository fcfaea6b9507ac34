// `npx quietus`: the installed command, as a user runs it.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { findBinary } from "quietus";
import { leftAfter, marker, start, until } from "./support.mjs";

const project = process.cwd();
// A program that says it is ready, traps INT and TERM (taking half a second to clean up: a
// second INT meanwhile would make quietus KILL the tree, and the trap would not finish), and
// would run for a minute.
const trapping = (word: string): string[] => [
  "bash",
  "-c",
  `trap 'sleep 0.5; echo trapped INT; exit 3' INT; trap 'sleep 0.5; echo trapped TERM; exit 5' TERM; echo ready; for i in $(seq 600); do sleep 0.1; done`,
  word,
];

test("the binary comes from this platform's package", () => {
  const binary = findBinary({});
  assert.equal(binary, path.join(project, "node_modules", "@quietus", "linux-x64-gnu", "bin", "quietus"));
});

test("npx quietus -i 2s -- sh -c 'sleep 60' exits 124", async () => {
  const word = marker();
  const run = start("npx", ["quietus", "-i", "2s", "--", "sh", "-c", "sleep 60", word]);
  const done = await run.done;
  assert.equal(done.code, 124, done.stderr);
  assert.match(done.stderr, /quietus: ended after 2s idle/);
  assert.deepEqual(await leftAfter(word), []);
});

test("npx quietus passes the program's own exit status and output through", async () => {
  const done = await start("npx", ["quietus", "--", "sh", "-c", "echo out; echo err >&2; exit 7"]).done;
  assert.equal(done.code, 7);
  assert.equal(done.stdout, "out\n");
  assert.match(done.stderr, /^err\n/);
});

test("a Ctrl-C on a terminal reaches the program's tree once", async () => {
  // `script` gives the command a terminal; ^C typed into it is the terminal's INT to the
  // foreground process group (npm, its shell, the shim, quietus). quietus must get one INT:
  // a second one would make it KILL the tree at once.
  const word = marker();
  const inner = `npx quietus -i 60s -- ${trapping(word).map((w) => `'${w.replace(/'/g, "'\\''")}'`).join(" ")}`;
  const run = spawn("script", ["-qefc", inner, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  run.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const closed = new Promise<void>((resolve) => run.on("close", () => resolve()));
  await until("ready", () => out.includes("ready"));
  run.stdin.write("\x03");
  await closed;
  assert.match(out, /trapped INT/);
  assert.match(out, /quietus: ended on request \(received INT\); sent INT\r?\n/);
  assert.doesNotMatch(out, /second INT/);
  assert.deepEqual(await leftAfter(word), []);
});

test("SIGINT to npx's process group reaches the tree, without a terminal", async () => {
  const word = marker();
  const run = start("npx", ["quietus", "-i", "60s", "--", ...trapping(word)], { detached: true });
  await until("ready", () => run.out().includes("ready"));
  process.kill(-(run.child.pid as number), "SIGINT");
  const done = await run.done;
  assert.match(done.stdout, /trapped INT/);
  assert.match(done.stderr, /quietus: ended on request \(received INT\); sent INT\n/);
  // npm exec dies of the INT its shell died of, as a shell's Ctrl-C expects.
  assert.equal(done.signal, "SIGINT");
  assert.deepEqual(await leftAfter(word), []);
});

test("one INT that reaches the shim twice (its group, and a parent passing it on) reaches quietus once", async () => {
  // As pnpm or yarn run a bin: a parent that passes INT on to it, in one process group with
  // it, and no terminal. A Ctrl-C to the group gives the shim two INTs within milliseconds;
  // passed on twice, quietus would KILL the tree at once.
  const word = marker();
  const parent = `
    const { spawn } = require("node:child_process");
    const child = spawn(process.argv[1], process.argv.slice(2), { stdio: "inherit" });
    process.on("SIGINT", () => setTimeout(() => child.kill("SIGINT"), 100)); // a busy parent
    child.on("exit", (code, signal) => { process.exitCode = code ?? 128; });
  `;
  const bin = path.join(project, "node_modules", ".bin", "quietus");
  const run = start(process.execPath, ["-e", parent, bin, "-i", "60s", "--", ...trapping(word)], { detached: true });
  await until("ready", () => run.out().includes("ready"));
  process.kill(-(run.child.pid as number), "SIGINT");
  const done = await run.done;
  assert.match(done.stdout, /trapped INT/);
  assert.match(done.stderr, /quietus: ended on request \(received INT\); sent INT\n/);
  assert.equal(done.code, 3, done.stderr);
  assert.deepEqual(await leftAfter(word), []);
});

test("node_modules/.bin/quietus passes TERM on and ends as the program did", async () => {
  const word = marker();
  const run = start(path.join(project, "node_modules", ".bin", "quietus"), ["-i", "60s", "--", ...trapping(word)], { detached: true });
  await until("ready", () => run.out().includes("ready"));
  process.kill(run.child.pid as number, "SIGTERM");
  const done = await run.done;
  assert.match(done.stdout, /trapped TERM/);
  assert.equal(done.code, 5, done.stderr); // the program's own status, as from the binary
  assert.deepEqual(await leftAfter(word), []);
});

test("the shim dies of the signal the binary died of", async () => {
  const word = marker();
  const run = start(path.join(project, "node_modules", ".bin", "quietus"), ["-i", "60s", "--", "bash", "-c", "echo ready; sleep 60", word], { detached: true });
  await until("ready", () => run.out().includes("ready"));
  process.kill(run.child.pid as number, "SIGTERM");
  const done = await run.done;
  assert.equal(done.signal, "SIGTERM", `code ${done.code}: ${done.stderr}`);
  assert.deepEqual(await leftAfter(word), []);
});

const omitted = process.env.QUIETUS_TEST_OMITTED_PROJECT;

test("without the platform package: the message says why and how to repair it", { skip: omitted ? false : "QUIETUS_TEST_OMITTED_PROJECT is not set" }, async () => {
  const done = await start("npx", ["quietus", "--", "true"], { cwd: omitted, env: { ...process.env, QUIETUS_BINARY_PATH: "" } }).done;
  assert.equal(done.code, 125);
  // The main tarball was installed alone (run.mjs: `npm install --omit=optional
  // packs/quietus-<v>.tgz`): the platform package's tarball beside it is what repairs it.
  const packs = path.join(path.dirname(omitted as string), "packs");
  const expected = [
    "quietus: the quietus binary for this machine (linux x64 with glibc) comes in the package @quietus/linux-x64-gnu, which is not installed.",
    `quietus was installed from ${path.join(packs, "quietus-0.2.0.tgz")}, not from the npm registry, so its platform package must be installed the same way:`,
    "npm looks for @quietus/linux-x64-gnu@0.2.0 in the registry and skips an optional dependency it cannot get there (and omits it with --omit=optional).",
    "To repair it, install the platform package's tarball made with it:",
    `    npm install ${path.join(packs, "quietus-linux-x64-gnu-0.2.0.tgz")}`,
    "or set QUIETUS_BINARY_PATH to the path of a quietus binary (a release's, or target/release/quietus of cargo build --release -p quietus-cli).",
    "",
  ].join("\n");
  assert.equal(done.stderr, expected);
});

test("QUIETUS_BINARY_PATH is honoured, and a wrong one named", { skip: omitted ? false : "QUIETUS_TEST_OMITTED_PROJECT is not set" }, async () => {
  const binary = findBinary({});
  const ok = await start("npx", ["quietus", "--", "sh", "-c", "exit 7"], { cwd: omitted, env: { ...process.env, QUIETUS_BINARY_PATH: binary } }).done;
  assert.equal(ok.code, 7, ok.stderr);
  const bad = await start("npx", ["quietus", "--", "true"], { cwd: omitted, env: { ...process.env, QUIETUS_BINARY_PATH: "/nonexistent/quietus" } }).done;
  assert.equal(bad.code, 125);
  assert.equal(bad.stderr, 'quietus: QUIETUS_BINARY_PATH is "/nonexistent/quietus", which does not exist: set it to the path of a quietus binary, or unset it to use the platform package\'s.\n');
});
