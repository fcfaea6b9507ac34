#!/usr/bin/env node
// The `quietus` command of the npm package: runs this platform's binary with the same
// arguments, stdin, stdout and stderr, passes signals on, and ends as it ended (its exit code,
// or dying of the signal that ended it), so that `npx quietus -- cmd` behaves as the binary.

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as tty from "node:tty";
import { QuietusNotFound } from "./errors";
import { findBinary } from "./platform";

// Passed on to the binary, which passes them to the program's tree (docs/cli.md, Signals). Not
// TSTP, TTIN, TTOU: they stop this process as they would stop the binary. Not USR1: Node takes
// it to start its inspector.
const FORWARDED: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2", "SIGALRM", "SIGWINCH"];

// Two INTs that reach this process within this long are one Ctrl-C delivered twice (to its
// process group and again by a parent such as npm exec, which passes signals on): quietus takes
// a second INT as "kill now".
const SAME_INT_MS = 300;

/**
 * Whether this process is in the foreground process group of its controlling terminal: then
 * a Ctrl-C on that terminal reaches every process of the group, the binary too.
 */
function inTerminalForeground(): boolean {
  try {
    const stat = fs.readFileSync("/proc/self/stat", "latin1");
    // pid (comm) state ppid pgrp session tty_nr tpgid …; comm may hold spaces and parens.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pgrp = Number(fields[2]);
    const ttyNr = Number(fields[4]);
    const tpgid = Number(fields[5]);
    return ttyNr !== 0 && tpgid > 0 && tpgid === pgrp;
  } catch {
    // No /proc (macOS): a terminal on one of the standard streams.
    return tty.isatty(0) || tty.isatty(1) || tty.isatty(2);
  }
}

function main(): void {
  let binary: string;
  try {
    binary = findBinary();
  } catch (e) {
    if (!(e instanceof QuietusNotFound)) throw e;
    process.stderr.write(`${e.message}\n`);
    process.exit(125); // quietus's own failure, as the binary says it
  }
  // On a terminal, in its foreground: the binary stays in this process group, so that it
  // reads the terminal (`--pty`) and gets the terminal's signals itself, as when run
  // directly; an INT is then not passed on again. Elsewhere it gets a process group (and
  // session) of its own, and every signal that reaches this process is passed on once.
  const foreground = inTerminalForeground();
  const child = spawn(binary, process.argv.slice(2), {
    stdio: "inherit",
    detached: !foreground,
  });
  let lastInt = -Infinity;
  const handlers = new Map<NodeJS.Signals, () => void>();
  for (const signal of FORWARDED) {
    const handler = (): void => {
      if (signal === "SIGINT") {
        if (foreground) return;
        const now = performance.now();
        const same = now - lastInt < SAME_INT_MS;
        lastInt = now;
        if (same) return;
      }
      try {
        child.kill(signal);
      } catch {
        // it is gone; its exit follows
      }
    };
    handlers.set(signal, handler);
    process.on(signal, handler);
  }
  child.on("error", (e: NodeJS.ErrnoException) => {
    process.stderr.write(`quietus: cannot run ${binary}: ${e.message}\n`);
    process.exit(e.code === "ENOENT" ? 127 : 126);
  });
  child.on("exit", (code, signal) => {
    for (const [s, handler] of handlers) process.removeListener(s, handler);
    if (signal) {
      // Die of the same signal, as the binary did (a shell sees 128+N and stops a loop on
      // INT only then); if it does not end this process, the status says it.
      try {
        process.kill(process.pid, signal);
      } catch {
        // fall through
      }
      setTimeout(() => process.exit(128 + (os.constants.signals[signal] ?? 0)), 200);
      return;
    }
    process.exit(code ?? 125);
  });
}

main();
