// `run()`: `child_process.execFile` with a timeout, done right — under the `quietus` command.

import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { QuietusError, QuietusNotFound } from "./errors";
import { findBinary } from "./platform";
import type { ResultOf } from "./protocol";

/** `T` without the keys `K` (unlike `Omit`, it keeps the known keys of a type with an index
 * signature). */
type Without<T, K extends PropertyKey> = { [P in keyof T as P extends K ? never : P]: T[P] };

/** The command's `--report`, keys in camelCase: the same object as `process/wait`'s answer,
 * without `processId` and `running`. */
export type Report = Without<Exclude<ResultOf<"process/wait">, { running: true }>, "processId" | "running">;
/** What a stalled tree was doing. */
export type Diagnosis = NonNullable<Report["diagnosis"]>;

/** Options of {@link run}. Durations are milliseconds. */
export interface RunOptions {
  /** End the tree once every source has been quiet this long (default 5 min). */
  idleTimeoutMs?: number;
  /** End it after this long even while active (default none). */
  hardTimeoutMs?: number;
  /** The working directory. */
  cwd?: string;
  /** The environment (replaces this process's, as for `child_process`); `QUIETUS_*`
   * variables in it also configure the options `run()` does not set. */
  env?: NodeJS.ProcessEnv;
  /** The command's stdin (bytes, or a string as UTF-8); else stdin is `/dev/null`. */
  input?: string | Uint8Array;
  /** Run it on a terminal: `input` is typed into it, its output is `stdout`. */
  pty?: boolean;
  /** The terminal's size with `pty` (default 24x80). */
  ptySize?: { rows: number; cols: number };
  /** Folders whose file activity counts (default `.agent`). */
  watch?: string | readonly string[];
  /** File activity does not count. */
  noWatch?: boolean;
  /** The work is done when an output line matches one of these regexes. */
  doneWhenOutput?: string | readonly string[];
  /** The work is done when one of these files appears or changes. */
  doneWhenFile?: string | readonly string[];
  /** Once the work is done, how long the command may take to exit by itself. */
  lingerMs?: number;
  /** End it once its whole tree has waited on input this long. */
  inputWaitTimeoutMs?: number;
  /** Between the first signal and KILL (default 5 s). */
  graceMs?: number;
  /** The first signal of the kill ladder (`"TERM"`, `"INT"`, `15`…). */
  killSignal?: string | number;
  /** Descendants' CPU does not count. */
  noChildren?: boolean;
  /** Bytes on its TCP sockets do not count. */
  noNetwork?: boolean;
  /** Output does not count. */
  noOutput?: boolean;
  /** stdin `/dev/null`, no controlling terminal, the no-prompt variables. */
  nonInteractive?: boolean;
  /** Leave its leftover process-group members running after it exits. */
  keepLeftovers?: boolean;
  /** End nothing: the report's `observed` says when and why quietus would have ended it. */
  observe?: boolean;
  /** How the tree is held: `auto`, `cgroup` or `group`. */
  containment?: "auto" | "cgroup" | "group";
  /** Where a stream's complete output goes once it passes 4 KiB (default
   * `~/.cache/quietus/logs`). */
  logDir?: string;
  /** Bytes kept of each stream: the first and the last half (default 1 MiB). */
  maxBuffer?: number;
  /** Reject with {@link CalledProcessError} when the status is not 0. */
  check?: boolean;
  /** More options for the command line (before `--`). */
  extraArgs?: readonly string[];
  /** Ends the command's tree (its kill ladder) and rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The quietus binary; default: `QUIETUS_BINARY_PATH`, else this platform's package's. */
  binary?: string;
}

/** What {@link run} resolves. */
export interface RunResult {
  /** The command run. */
  argv: string[];
  /** The status, as a shell shows it: the command's own exit code, 124 when it was ended
   * for being idle or past the hard timeout, 0 when the work was done, 128+N when it died of
   * signal N that quietus did not send, 125 for quietus's own failure, 126/127 when the
   * program cannot be run or is not found. */
  exitCode: number;
  /** Why it ended. */
  outcome: Report["outcome"];
  /** After an idle or input-wait timeout: what the tree was doing; else null. */
  diagnosis: Diagnosis | null;
  /** From the start to the end of the run (quietus's measure). */
  durationMs: Report["durationMs"];
  /** The signal the command died of, or null. */
  signal: Report["signal"];
  /** The command's pid, or null when it never started. */
  pid: Report["pid"];
  /** The head and the tail of its output (`stdoutOmitted` bytes of the middle left out). */
  stdout: Buffer;
  /** The head and the tail of its error output. */
  stderr: Buffer;
  /** Bytes of stdout left out of `stdout`. */
  stdoutOmitted: number;
  /** Bytes of stderr left out of `stderr`. */
  stderrOmitted: number;
  /** The whole report: `idleMs`, `ladder`, `log` (the complete logs of the streams that
   * passed 4 KiB, with their SHA-256), `error` (why it could not be run)… */
  report: Report;
}

// After quietus itself exited, how long its output pipes may stay open (held by a process
// that is not the command's: quietus passes none of its descriptors on).
const DRAIN_AFTER_EXIT_MS = 5000;

/** The first and the last `limit / 2` bytes of a stream, and how many were left out. */
class HeadTail {
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private total = 0;

  constructor(limit: number) {
    this.headLimit = limit - Math.floor(limit / 2);
    this.tailLimit = Math.floor(limit / 2);
  }

  add(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.headLimit - this.headBytes;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      this.head.push(part);
      this.headBytes += part.length;
      chunk = chunk.subarray(room);
    }
    if (chunk.length === 0 || this.tailLimit === 0) return;
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    if (this.tailBytes > 2 * this.tailLimit) {
      const all = Buffer.concat(this.tail);
      const kept = Buffer.from(all.subarray(all.length - this.tailLimit));
      this.tail = [kept];
      this.tailBytes = kept.length;
    }
  }

  result(): [Buffer, number] {
    const tail = Buffer.concat(this.tail);
    const kept = Buffer.concat([...this.head, tail.subarray(Math.max(0, tail.length - this.tailLimit))]);
    return [kept, this.total - kept.length];
  }
}

function list(value: string | readonly string[] | undefined, name: string): string[] {
  if (value === undefined) return [];
  const items = typeof value === "string" ? [value] : [...value];
  for (const item of items) {
    if (typeof item !== "string") throw new TypeError(`${name} must hold strings, not ${JSON.stringify(item)}`);
  }
  return items;
}

function millis(value: number | undefined, name: string): string | null {
  if (value === undefined) return null;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a finite number of milliseconds >= 0, not ${value}`);
  }
  return `${Math.ceil(value)}ms`;
}

/** The `quietus` command line for `run()`'s options. */
function commandLine(report: string, argv: string[], o: RunOptions): string[] {
  const line = ["--quiet", "--report", report];
  const add = (flag: string, value: string | null): void => {
    if (value !== null) line.push(flag, value);
  };
  add("--idle-timeout", millis(o.idleTimeoutMs, "idleTimeoutMs"));
  line.push("--hard-timeout", millis(o.hardTimeoutMs, "hardTimeoutMs") ?? "none");
  add("--grace", millis(o.graceMs, "graceMs"));
  if (o.killSignal !== undefined) line.push("--signal", String(o.killSignal));
  add("--input-wait-timeout", millis(o.inputWaitTimeoutMs, "inputWaitTimeoutMs"));
  add("--linger", millis(o.lingerMs, "lingerMs"));
  if (o.noWatch) line.push("--no-watch");
  for (const p of list(o.watch, "watch")) line.push("--watch", p);
  for (const p of list(o.doneWhenOutput, "doneWhenOutput")) line.push("--done-when-output", p);
  for (const p of list(o.doneWhenFile, "doneWhenFile")) line.push("--done-when-file", p);
  if (o.noChildren) line.push("--no-children");
  if (o.noNetwork) line.push("--no-network");
  if (o.noOutput) line.push("--no-output");
  if (o.nonInteractive) line.push("--non-interactive");
  if (o.keepLeftovers) line.push("--keep-leftovers");
  if (o.observe) line.push("--observe");
  if (o.pty) {
    line.push("--pty");
    if (o.ptySize) line.push("--pty-size", `${o.ptySize.rows}x${o.ptySize.cols}`);
  }
  if (o.containment !== undefined) line.push("--containment", o.containment);
  if (o.logDir !== undefined) line.push("--log-dir", o.logDir);
  line.push(...list(o.extraArgs, "extraArgs"), "--", ...argv);
  return line;
}

/** snake_case keys to camelCase, all the way down (as `quietus serve` names the report's). */
function camelCaseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelCaseKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()), camelCaseKeys(v)]),
    );
  }
  return value;
}

// The quietus commands running now: ended (TERM: their ladder) if this process exits first.
const live = new Set<ChildProcess>();
let exitHook = false;
function track(child: ChildProcess): void {
  live.add(child);
  if (!exitHook) {
    exitHook = true;
    process.on("exit", () => {
      for (const c of live) {
        try {
          c.kill("SIGTERM");
        } catch {
          // gone
        }
      }
    });
  }
}

/**
 * Runs `argv` under the `quietus` command and resolves a {@link RunResult}.
 *
 * Where `execFile(file, args, {timeout})` kills only the child after a fixed time (and waits
 * while a grandchild holds its pipes), this ends the command's whole process tree once it has
 * been idle — no output, no file activity under `watch`, no CPU of its descendants, no TCP
 * bytes — for `idleTimeoutMs`, or at `hardTimeoutMs`, and says why it looked stalled
 * (`diagnosis`). It resolves once the tree is gone; the output it keeps is bounded.
 *
 * @throws QuietusNotFound when the binary is missing (the message says how to repair it);
 * QuietusError when quietus itself failed before running anything; CalledProcessError with
 * `check: true` and a status that is not 0; the `signal`'s reason when it was aborted.
 */
export async function run(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((w) => typeof w === "string")) {
    throw new TypeError(`argv must be a non-empty array of strings (the program and its arguments), not ${JSON.stringify(argv)}`);
  }
  const words = [...argv];
  const capture = options.maxBuffer ?? 1 << 20;
  if (!Number.isInteger(capture) || capture < 0) throw new RangeError(`maxBuffer must be a whole number >= 0, not ${capture}`);
  const input = typeof options.input === "string" ? Buffer.from(options.input) : options.input;
  const signal = options.signal;
  if (signal?.aborted) throw signal.reason;
  const binary = options.binary ?? findBinary(options.env ?? process.env);
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "quietus-run-"));
  try {
    const reportPath = path.join(folder, "report.json");
    const line = commandLine(reportPath, words, options);
    const child = spawn(binary, line, {
      stdio: [input !== undefined ? "pipe" : "ignore", "pipe", "pipe"],
      cwd: options.cwd,
      env: options.env ?? process.env,
    });
    track(child);
    const out = new HeadTail(capture);
    const err = new HeadTail(capture);
    child.stdout?.on("data", (c: Buffer) => out.add(c));
    child.stderr?.on("data", (c: Buffer) => err.add(c));
    if (child.stdin) {
      child.stdin.on("error", () => undefined); // the command did not read it all
      child.stdin.end(input);
    }
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    const onAbort = (): void => {
      aborted = true;
      // quietus runs its kill ladder and writes its report; KILL after the grace and more
      // (its guardian then ends the tree).
      child.kill("SIGTERM");
      killTimer = setTimeout(() => child.kill("SIGKILL"), (options.graceMs ?? 5000) + 10000);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    let status: { code: number | null; signal: NodeJS.Signals | null };
    try {
      status = await new Promise((resolve, reject) => {
        child.once("error", (e: NodeJS.ErrnoException) => {
          if (e.code === "ENOENT" || e.code === "EACCES") {
            reject(new QuietusNotFound(`cannot run the quietus binary ${binary}: ${e.message}`));
          } else reject(e);
        });
        child.once("exit", (code, sig) => resolve({ code, signal: sig }));
      });
      // Its pipes: closed with it, or given up after a bound.
      await new Promise<void>((resolve) => {
        const streams = [child.stdout, child.stderr].filter((s) => s && !s.closed);
        if (streams.length === 0) return resolve();
        let left = streams.length;
        const timer = setTimeout(() => {
          for (const s of streams) s?.destroy();
          resolve();
        }, DRAIN_AFTER_EXIT_MS);
        for (const s of streams) {
          s?.once("close", () => {
            if (--left === 0) {
              clearTimeout(timer);
              resolve();
            }
          });
        }
      });
    } finally {
      live.delete(child);
      clearTimeout(killTimer);
      signal?.removeEventListener("abort", onAbort);
    }
    if (aborted && signal) throw signal.reason;
    const [stdout, stdoutOmitted] = out.result();
    const [stderr, stderrOmitted] = err.result();
    let raw: unknown = null;
    try {
      const text = fs.readFileSync(reportPath, "utf8");
      raw = text.trim() ? JSON.parse(text) : null;
    } catch {
      raw = null;
    }
    const exitCode = status.code ?? 128 + (status.signal ? os.constants.signals[status.signal] : 0);
    if (!raw || typeof raw !== "object") {
      const said = stderr.toString().trim();
      throw new QuietusError(`quietus exited ${exitCode} without a report: ${said || "no message"}`);
    }
    const report = camelCaseKeys(raw) as Report;
    const result: RunResult = {
      argv: words,
      exitCode,
      outcome: report.outcome,
      diagnosis: report.diagnosis ?? null,
      stdout,
      stderr,
      stdoutOmitted,
      stderrOmitted,
      durationMs: report.durationMs,
      signal: report.signal,
      pid: report.pid,
      report,
    };
    if (options.check && result.exitCode !== 0) throw new CalledProcessError(result);
    return result;
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** Raised by `run({check: true})` when the command's status is not 0. */
export class CalledProcessError extends QuietusError {
  /** The whole result. */
  readonly result: RunResult;
  constructor(result: RunResult) {
    let message = `command ${JSON.stringify(result.argv)} exited with status ${result.exitCode}`;
    if (result.outcome !== "exited") message += ` (outcome ${result.outcome})`;
    if (result.diagnosis) message += `; diagnosis: ${result.diagnosis.summary}`;
    if (typeof result.report.error === "string") message += `; ${result.report.error}`;
    super(message);
    this.result = result;
  }
}
