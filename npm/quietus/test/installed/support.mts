// Helpers of the installed-package tests: unique markers, leak checks, process output.

import { type ChildProcess, spawn, type SpawnOptions } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";

/** A unique word to put in a test's argv and environment. */
export function marker(): string {
  return `quietus-npm-test-${randomUUID()}`;
}

/** The pids of the processes whose argv or environment holds `word` (not this process's). */
export function holders(word: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    for (const file of ["cmdline", "environ"]) {
      try {
        if (fs.readFileSync(`/proc/${entry}/${file}`).includes(word)) {
          found.push(Number(entry));
          break;
        }
      } catch {
        // gone, or not ours to read
      }
    }
  }
  return found;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls until no process holds `word` (at most `limitMs`); returns those left. */
export async function leftAfter(word: string, limitMs = 15_000): Promise<number[]> {
  const end = Date.now() + limitMs;
  for (;;) {
    const left = holders(word);
    if (left.length === 0 || Date.now() > end) return left;
    await sleep(100);
  }
}

/** Polls `condition` every 50 ms until it holds (at most `limitMs`). */
export async function until(what: string, condition: () => boolean, limitMs = 20_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A child whose output is collected; `done` resolves once it exited and its pipes closed. */
export function start(cmd: string, args: string[], options: SpawnOptions = {}): {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  done: Promise<Finished>;
} {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Finished>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, out: () => stdout, err: () => stderr, done };
}

