// `Client`: a `quietus serve` of its own, spoken to in JSON-RPC over its stdin and stdout, and
// the processes it runs. Every type of the protocol comes from src/protocol.ts, generated from
// the protocol's description.

import { type ChildProcess, spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import {
  ClientClosed,
  QuietusNotFound,
  Rejected,
  RpcError,
  ServerDied,
  StdinClosed,
  UnknownProcess,
  Unsupported,
  rpcError,
} from "./errors";
import { findBinary } from "./platform";
import type {
  MethodName,
  NotificationName,
  Notifications,
  ParamsOf,
  ResultOf,
} from "./protocol";

/** `process/start`'s parameters. */
export type StartParams = ParamsOf<"process/start">;
/** `process/wait`'s answer for a finished process: the command's report, in camelCase. */
export type ProcessResult = Exclude<ResultOf<"process/wait">, { running: true }>;
/** `process/snapshot`'s answer, with the retained output decoded to bytes (null for a
 * stream the process does not have). */
export type Snapshot = Omit<ResultOf<"process/snapshot">, "stdout" | "stderr" | "terminal"> & {
  stdout: Buffer | null;
  stderr: Buffer | null;
  terminal: Buffer | null;
};
/** `initialize`'s answer. */
export type ServerInfo = ResultOf<"initialize">;
/** One process of `Client.list()`. */
export type ProcessInfo = ResultOf<"process/list">["sessions"][number];

/** A notification about one process, tagged with its `method`; output carries its bytes. */
export type ProcessEvent = {
  [N in NotificationName]: { method: N } & Notifications[N] &
    (N extends "process/output" ? { bytes: Buffer } : unknown);
}[NotificationName];

/** Options of `new Client()`: `quietus serve`'s own, and how to run it. */
export interface ClientOptions {
  /** Live processes at most (`--max-processes`). */
  maxProcesses?: number;
  /** Output kept in memory per process and stream (`--retain-bytes`). */
  retainBytes?: number;
  /** The grace between TERM and KILL when the server ends (`--shutdown-grace`). */
  shutdownGraceMs?: number;
  /** At most one output notification per process and stream per this (`--output-throttle`). */
  outputThrottleMs?: number;
  /** Which processes get output events: `"all"`, `"none"` or program names. */
  outputNotifications?: "all" | "none" | readonly string[];
  /** Where the complete logs go (`--log-dir`). */
  logDir?: string;
  /** The server's environment (its processes inherit it); default: this process's. */
  env?: NodeJS.ProcessEnv;
  /** The server's working directory. */
  cwd?: string;
  /** The quietus binary; default: `QUIETUS_BINARY_PATH`, else this platform's package's. */
  binary?: string;
  /** Output data kept per process for `events()` while nobody reads them (default 4 MiB);
   * beyond it output events are dropped and the next one of that stream says `truncated`. */
  eventBufferBytes?: number;
  /** Called with every message sent to the server and received from it (parsed JSON), for
   * logs and tests. */
  trace?: (direction: "send" | "receive", message: unknown) => void;
}

/** Options of `Client.start()`: `process/start`'s parameters, with `processId` optional (a
 * fresh one by default), and `stdin`/`pty` as shorthands for `io`. */
export type StartOptions = Partial<Omit<StartParams, "argv">> & {
  /** Open a pipe to its stdin for `write()` (`io: {pipe: {stdin: "open"}}`). */
  stdin?: boolean;
  /** Run it on a terminal: `true` (24x80) or its size (`io: {pty: {rows, cols}}`). */
  pty?: boolean | { rows: number; cols: number };
};

/** Options of a call that may be given up. */
export interface CallOptions {
  /** Gives up waiting for the answer (the request itself is not undone). */
  signal?: AbortSignal;
}

const EVENT_BYTES_LIMIT = 4 << 20;

// The servers running now: told to end (TERM: every process gets its ladder) when this process
// exits, even by process.exit(); their stdin closing with this process says it too.
const liveServers = new Set<ChildProcess>();
let exitHook = false;
function trackServer(child: ChildProcess): void {
  liveServers.add(child);
  if (exitHook) return;
  exitHook = true;
  process.on("exit", () => {
    for (const server of liveServers) {
      try {
        server.kill("SIGTERM");
      } catch {
        // gone
      }
    }
  });
}
const STDERR_LINES = 50;
let processCount = 0;

interface Pending {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** The events of one process waiting to be read, in the server's order. */
class EventQueue {
  private readonly queue: ProcessEvent[] = [];
  private bytes = 0;
  private readonly dropped = new Set<string>();
  private waiter: { resolve(): void } | null = null;
  /** The closed event arrived. */
  closedSeen = false;
  /** Someone iterates it. */
  taken = false;

  constructor(private readonly limit: number) {}

  push(event: ProcessEvent): void {
    if (event.method === "process/output") {
      const size = event.bytes.length;
      if (this.bytes + size > this.limit) {
        this.dropped.add(event.stream);
        return;
      }
      if (this.dropped.delete(event.stream)) event.truncated = true;
      this.bytes += size;
    } else if (event.method === "process/activity" && this.dropped.size > 0) {
      return;
    } else if (event.method === "process/closed") {
      this.closedSeen = true;
    }
    this.queue.push(event);
    this.wake();
  }

  shift(): ProcessEvent | undefined {
    const event = this.queue.shift();
    if (event?.method === "process/output") this.bytes -= event.bytes.length;
    return event;
  }

  /** Resolves at the next push (or wake). */
  next(): Promise<void> {
    return new Promise((resolve) => {
      this.waiter = { resolve };
    });
  }

  wake(): void {
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.resolve();
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? Object.assign(new Error("This operation was aborted"), { name: "AbortError" });
}

function serverArgv(options: ClientOptions): string[] {
  const argv = ["serve"];
  const whole = (name: string, value: number | undefined, min: number): string | null => {
    if (value === undefined) return null;
    if (!Number.isInteger(value) || value < min) {
      throw new RangeError(`${name} must be a whole number >= ${min}, not ${value}`);
    }
    return String(value);
  };
  const add = (flag: string, value: string | null, suffix = ""): void => {
    if (value !== null) argv.push(flag, value + suffix);
  };
  add("--max-processes", whole("maxProcesses", options.maxProcesses, 1));
  add("--retain-bytes", whole("retainBytes", options.retainBytes, 0));
  add("--shutdown-grace", whole("shutdownGraceMs", options.shutdownGraceMs, 0), "ms");
  add("--output-throttle", whole("outputThrottleMs", options.outputThrottleMs, 0), "ms");
  const notifications = options.outputNotifications;
  if (notifications !== undefined) {
    argv.push("--output-notifications", typeof notifications === "string" ? notifications : notifications.join(","));
  }
  if (options.logDir !== undefined) argv.push("--log-dir", options.logDir);
  return argv;
}

/** Rejects with a typed error for a status that is not `accepted`. */
function stdinStatus(processId: string, result: { status: string }): void {
  switch (result.status) {
    case "accepted":
      return;
    case "unknown_process":
      throw new UnknownProcess(-32003, `unknown_process: no process has processId ${JSON.stringify(processId)}`);
    case "stdin_closed":
      throw new StdinClosed(`the stdin of process ${JSON.stringify(processId)} is closed (closed before, the process ended, or it was started without stdin: true)`);
    default:
      throw new RpcError(0, `unexpected answer ${JSON.stringify(result)}`);
  }
}

/** True: done; false: the process had already ended; throws for the rest. */
function actionStatus(processId: string, result: { status: string; note?: string }, what: string): boolean {
  switch (result.status) {
    case "accepted":
    case "ack":
      return true;
    case "already_terminated":
      return false;
    case "unknown_process":
    case "no_such_session":
      throw new UnknownProcess(-32003, `unknown_process: no process has processId ${JSON.stringify(processId)}`);
    case "unsupported":
      throw new Unsupported(`${what} of process ${JSON.stringify(processId)}: ${result.note ?? "unsupported"}`);
    case "reject":
      throw new Rejected(`${what} of process ${JSON.stringify(processId)} rejected: ${result.note ?? ""}`);
    default:
      throw new RpcError(0, `unexpected answer to ${what}: ${JSON.stringify(result)}`);
  }
}

function decodeB64(value: string | null | undefined): Buffer | null {
  return typeof value === "string" ? Buffer.from(value, "base64") : null;
}

/**
 * A process started by {@link Client.start}: every per-process method of the protocol.
 *
 * Methods that act on the process resolve `true` when done and `false` when the process had
 * already ended; an unknown process rejects with {@link UnknownProcess}.
 */
export class Process {
  /** @internal */
  constructor(
    private readonly client: Client,
    /** The id it was started under. */
    readonly processId: string,
    /** The program's pid (and process group). */
    readonly pid: number,
  ) {}

  /** Writes `data` (bytes, or a string as UTF-8) to its stdin (or types it into its
   * terminal), in order with the other writes. Rejects with {@link StdinClosed} when its
   * stdin is closed, {@link StdinBacklog} when the child does not read it. */
  async write(data: string | Uint8Array, options?: CallOptions): Promise<void> {
    const params: ParamsOf<"process/write"> =
      typeof data === "string"
        ? { processId: this.processId, text: data }
        : { processId: this.processId, data: Buffer.from(data).toString("base64") };
    stdinStatus(this.processId, await this.client.request("process/write", params, options));
  }

  /** Closes its stdin after the writes before (a terminal gets end-of-file). */
  async closeStdin(options?: CallOptions): Promise<void> {
    stdinStatus(this.processId, await this.client.request("process/closeStdin", { processId: this.processId }, options));
  }

  /** Resizes its terminal; {@link Unsupported} for a process without one. */
  async resize(rows: number, cols: number, options?: CallOptions): Promise<boolean> {
    const result = await this.client.request("process/resize", { processId: this.processId, rows, cols }, options);
    return actionStatus(this.processId, result, "resize");
  }

  /** Ends its tree: its own kill ladder, `graceMs` between TERM and KILL, or KILL now
   * (`force: true`). */
  async terminate(options: { force?: boolean; graceMs?: number } & CallOptions = {}): Promise<boolean> {
    if (options.force && options.graceMs !== undefined) {
      throw new TypeError("terminate: give force: true or graceMs, not both");
    }
    const params: ParamsOf<"process/terminate"> = { processId: this.processId };
    if (options.force) params.mode = "force";
    else if (options.graceMs !== undefined) params.mode = { graceful: { timeoutMs: options.graceMs } };
    const result = await this.client.request("process/terminate", params, options);
    return actionStatus(this.processId, result, "terminate");
  }

  /** Sends a `process/control` action. */
  async control(action: ParamsOf<"process/control">["action"], options?: CallOptions): Promise<boolean> {
    const result = await this.client.request("process/control", { processId: this.processId, action }, options);
    return actionStatus(this.processId, result, "control");
  }

  /** Ctrl-C: through its terminal, or SIGINT to its process group. */
  interrupt(options?: CallOptions): Promise<boolean> {
    return this.control({ type: "send_ctrl_c" }, options);
  }

  /** KILL its whole tree now. */
  kill(options?: CallOptions): Promise<boolean> {
    return this.control({ type: "force_kill" }, options);
  }

  /** Counts as activity (and replaces the idle timeout when one is given). */
  keepalive(idleTimeoutMs?: number, options?: CallOptions): Promise<boolean> {
    return this.control(
      idleTimeoutMs === undefined ? { type: "keepalive" } : { type: "keepalive", extendTimeoutMs: idleTimeoutMs },
      options,
    );
  }

  /** Replaces its idle timeout. */
  setIdleTimeout(idleTimeoutMs: number, options?: CallOptions): Promise<boolean> {
    return this.control({ type: "set_idle_timeout", timeoutMs: idleTimeoutMs }, options);
  }

  /** Its retained output (head and tail, decoded) and byte counts. */
  async snapshot(options?: CallOptions): Promise<Snapshot> {
    const result = await this.client.request("process/snapshot", { processId: this.processId }, options);
    return {
      ...result,
      stdout: decodeB64(result.stdout),
      stderr: decodeB64(result.stderr),
      terminal: decodeB64(result.terminal),
    };
  }

  /** Waits until it has ended and resolves its report; with `timeoutMs`, resolves null when
   * it still runs after it. `signal` gives up the wait (the process runs on). */
  wait(options: { timeoutMs: number } & CallOptions): Promise<ProcessResult | null>;
  wait(options?: CallOptions): Promise<ProcessResult>;
  async wait(options: { timeoutMs?: number } & CallOptions = {}): Promise<ProcessResult | null> {
    const params: ParamsOf<"process/wait"> = { processId: this.processId };
    if (options.timeoutMs !== undefined) params.timeoutMs = options.timeoutMs;
    const result = await this.client.request("process/wait", params, options);
    return result.running ? null : result;
  }

  /**
   * Its notifications as events, in the server's order, up to and including
   * `process/closed`. One iterator per process: events of a process nobody iterates are
   * kept (output beyond `eventBufferBytes` is dropped, and the next output event of that
   * stream says `truncated`). `signal` ends the iteration (rejecting with its reason).
   */
  events(options: CallOptions = {}): AsyncIterableIterator<ProcessEvent> {
    return this.client._events(this.processId, options.signal);
  }

  /** The same as `events()`. */
  [Symbol.asyncIterator](): AsyncIterableIterator<ProcessEvent> {
    return this.events();
  }
}

/**
 * A `quietus serve` of its own, and its processes.
 *
 * `new Client()` starts the server; `close()` ends every process it still runs (their kill
 * ladder, the grace cut to `shutdownGraceMs`) and the server. The client does not keep Node
 * running by itself: while no call waits for an answer and no event is awaited, Node may exit,
 * and then the server, its stdin closed, ends every process too (as it does when this process
 * dies in any way).
 */
export class Client {
  private readonly child: ChildProcess;
  private readonly stdin: Writable;
  private readonly stdout: Readable;
  private readonly pending = new Map<number, Pending>();
  private readonly queues = new Map<string, EventQueue>();
  private readonly stderrLines: string[] = [];
  private readonly eventBufferBytes: number;
  private readonly closeWaitMs: number;
  private readonly trace: ClientOptions["trace"];
  private nextId = 1;
  private waiting = 0;
  private isClosed = false;
  private gone: ServerDied | null = null;
  private readonly exited: Promise<void>;
  /** The server's answer to `initialize` (rejects when the server did not start). */
  readonly ready: Promise<ServerInfo>;

  constructor(options: ClientOptions = {}) {
    const limit = options.eventBufferBytes ?? EVENT_BYTES_LIMIT;
    if (!Number.isInteger(limit) || limit < 0) {
      throw new RangeError(`eventBufferBytes must be a whole number >= 0, not ${limit}`);
    }
    this.eventBufferBytes = limit;
    this.closeWaitMs = (options.shutdownGraceMs ?? 5000) + 20000;
    this.trace = options.trace;
    const argv = serverArgv(options);
    const binary = options.binary ?? findBinary(options.env ?? process.env);
    // Its own session: a Ctrl-C meant for this program does not reach the server's
    // processes behind its back; this program's end (its pipes closing) ends them.
    const child = spawn(binary, argv, {
      stdio: ["pipe", "pipe", "pipe"],
      env: options.env ?? process.env,
      cwd: options.cwd,
      detached: true,
    });
    this.child = child;
    this.stdin = child.stdin as Writable;
    this.stdout = child.stdout as Readable;
    this.stdin.on("error", () => {
      // EPIPE: the server is gone; its exit says how.
    });
    let spawnError: Error | null = null;
    child.on("error", (e: NodeJS.ErrnoException) => {
      spawnError = e;
    });
    this.readLines(this.stdout, (line) => this.dispatch(line));
    this.readLines(child.stderr as Readable, (line) => {
      this.stderrLines.push(line);
      if (this.stderrLines.length > STDERR_LINES) this.stderrLines.shift();
    });
    const stdoutClosed = new Promise<void>((resolve) => this.stdout.on("close", resolve));
    this.exited = new Promise<void>((resolve) => {
      child.on("close", (code: number | null, signal: NodeJS.Signals | null) => {
        void stdoutClosed.then(() => {
          this.serverGone(code, signal, spawnError, binary);
          resolve();
        });
      });
    });
    trackServer(child);
    this.updateRef();
    this.ready = this.request("initialize", { clientInfo: { name: "quietus-npm" } });
    // An unobserved failure of `ready` is not an unhandled rejection: calls report it.
    this.ready.catch(() => undefined);
  }

  /** The pid of the `quietus serve` process. */
  get serverPid(): number | undefined {
    return this.child.pid;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.isClosed;
  }

  private readLines(stream: Readable, onLine: (line: string) => void): void {
    const decoder = new StringDecoder("utf8");
    let rest = "";
    stream.on("data", (chunk: Buffer) => {
      rest += decoder.write(chunk);
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        const line = rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        if (line.trim() !== "") onLine(line);
      }
    });
    stream.on("end", () => {
      rest += decoder.end();
      if (rest.trim() !== "") onLine(rest);
      rest = "";
    });
  }

  /** Keeps Node running only while something waits on the server. */
  private updateRef(): void {
    const handles = [this.child, this.stdout, this.child.stderr, this.stdin] as unknown as {
      ref?(): void;
      unref?(): void;
    }[];
    const busy = this.waiting > 0 || this.pending.size > 0;
    for (const h of handles) {
      if (busy) h?.ref?.();
      else h?.unref?.();
    }
  }

  private dispatch(line: string): void {
    let message: { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
    try {
      message = JSON.parse(line);
    } catch {
      this.stderrLines.push(`(a line on stdout that is not JSON: ${line.slice(0, 200)})`);
      return;
    }
    if (!message || typeof message !== "object") return;
    this.trace?.("receive", message);
    if (typeof message.method === "string" && message.id === undefined) {
      this.notify(message.method, message.params);
      return;
    }
    if (typeof message.id !== "number") return;
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    this.updateRef();
    if (message.error !== undefined) pending.reject(rpcError(message.error));
    else pending.resolve(message.result);
  }

  private notify(method: string, params: unknown): void {
    if (!params || typeof params !== "object") return;
    const p = params as { processId?: unknown; data?: unknown };
    if (typeof p.processId !== "string") return;
    const queue = this.queues.get(p.processId);
    if (!queue) return;
    const event = { method, ...p } as ProcessEvent;
    if (event.method === "process/output") {
      event.bytes = Buffer.from(typeof p.data === "string" ? p.data : "", "base64");
    }
    queue.push(event);
  }

  private serverGone(code: number | null, signal: NodeJS.Signals | null, spawnError: Error | null, binary: string): void {
    liveServers.delete(this.child);
    const said = this.stderrLines.join("\n");
    let error: ServerDied;
    if (spawnError) {
      error = new ServerDied(`cannot run the quietus binary ${binary}: ${spawnError.message}`, code, signal, said);
    } else {
      const status = signal ? `signal ${signal}` : `exit status ${code}`;
      error = new ServerDied(
        `quietus serve (pid ${this.child.pid}) ended (${status})${said ? `; it said:\n${said}` : ""}\nStart a new Client.`,
        code,
        signal,
        said,
      );
    }
    this.gone = error;
    const failure = this.isClosed ? new ClientClosed("the client is closed") : error;
    for (const pending of this.pending.values()) pending.reject(failure);
    this.pending.clear();
    for (const queue of this.queues.values()) queue.wake();
    this.updateRef();
  }

  private failure(): Error {
    if (this.isClosed) return new ClientClosed("the client is closed: start a new Client");
    return this.gone ?? new ClientClosed("the client is closed");
  }

  /**
   * Sends any request of the protocol and resolves its result (typed errors: {@link
   * RpcError} and its subclasses). `signal` gives up waiting for the answer.
   */
  request<M extends MethodName>(method: M, params: ParamsOf<M>, options: CallOptions = {}): Promise<ResultOf<M>> {
    return new Promise<ResultOf<M>>((resolve, reject) => {
      const signal = options.signal;
      if (this.isClosed || this.gone) {
        reject(this.failure());
        return;
      }
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const id = this.nextId++;
      const onAbort = (): void => {
        if (this.pending.delete(id)) {
          this.updateRef();
          reject(abortReason(signal as AbortSignal));
        }
      };
      this.pending.set(id, {
        resolve: (value) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(value as ResultOf<M>);
        },
        reject: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.updateRef();
      const message = { jsonrpc: "2.0", id, method, params };
      this.trace?.("send", message);
      this.stdin.write(`${JSON.stringify(message)}\n`);
    });
  }

  /**
   * Starts `argv` under supervision and resolves its {@link Process}.
   *
   * Unset settings are the library's defaults (idle timeout 5 min). `context` is copied onto
   * its every event.
   *
   * @throws ProcessIdTaken, TooManyProcesses, SpawnFailed (`kind`), InvalidParams.
   */
  async start(argv: readonly string[], options: StartOptions = {}): Promise<Process> {
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((w) => typeof w === "string")) {
      throw new TypeError(`argv must be a non-empty array of strings (the program and its arguments), not ${JSON.stringify(argv)}`);
    }
    const { stdin, pty, processId: id, ...rest } = options;
    const processId = id ?? `node${process.pid}-${++processCount}`;
    const params: StartParams = { ...rest, processId, argv: [...argv] };
    if (pty) {
      if (stdin) throw new TypeError("stdin and pty exclude each other: a terminal is the stdin");
      if (rest.io) throw new TypeError("give io or pty, not both");
      params.io = { pty: pty === true ? { rows: 24, cols: 80 } : { rows: pty.rows, cols: pty.cols } };
    } else if (stdin) {
      if (rest.io) throw new TypeError("give io or stdin, not both");
      params.io = { pipe: { stdin: "open" } };
    }
    // The queue is in place before the request leaves: no event can come before it.
    const old = this.queues.get(processId);
    const fresh = new EventQueue(this.eventBufferBytes);
    const replace = old === undefined || old.closedSeen;
    if (replace) this.queues.set(processId, fresh);
    try {
      const result = await this.request("process/start", params);
      return new Process(this, processId, result.pid);
    } catch (e) {
      if (replace && this.queues.get(processId) === fresh) {
        if (old === undefined) this.queues.delete(processId);
        else this.queues.set(processId, old);
      }
      throw e;
    }
  }

  /** The handle of a process this client started. */
  process(processId: string, pid = 0): Process {
    if (!this.queues.has(processId)) {
      throw new UnknownProcess(-32003, `this client started no process ${JSON.stringify(processId)}`);
    }
    return new Process(this, processId, pid);
  }

  /** Every process the server still holds (running, or finished less than 10 min ago). */
  async list(options?: CallOptions): Promise<ProcessInfo[]> {
    return (await this.request("process/list", {}, options)).sessions;
  }

  /** @internal The event iterator of a process. */
  _events(processId: string, signal: AbortSignal | undefined): AsyncIterableIterator<ProcessEvent> {
    const queue = this.queues.get(processId);
    if (!queue) throw new UnknownProcess(-32003, `this client started no process ${JSON.stringify(processId)}`);
    if (queue.taken) throw new TypeError(`the events of process ${JSON.stringify(processId)} are already being iterated`);
    queue.taken = true;
    let done = false;
    const client = this;
    const iterator: AsyncIterableIterator<ProcessEvent> = {
      async next(): Promise<IteratorResult<ProcessEvent>> {
        if (done) return { done: true, value: undefined };
        for (;;) {
          const event = queue.shift();
          if (event) {
            if (event.method === "process/closed") done = true;
            return { done: false, value: event };
          }
          if (client.isClosed || client.gone) throw client.failure();
          if (signal?.aborted) throw abortReason(signal);
          const onAbort = (): void => queue.wake();
          signal?.addEventListener("abort", onAbort, { once: true });
          client.waiting++;
          client.updateRef();
          try {
            await queue.next();
          } finally {
            client.waiting--;
            client.updateRef();
            signal?.removeEventListener("abort", onAbort);
          }
        }
      },
      async return(): Promise<IteratorResult<ProcessEvent>> {
        done = true;
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  /**
   * Ends every process still running (their ladder, the grace cut to `shutdownGraceMs`) and
   * the server, and waits for both; calls made after reject with {@link ClientClosed}.
   */
  async close(): Promise<void> {
    if (!this.isClosed) {
      this.isClosed = true;
      for (const queue of this.queues.values()) queue.wake();
      this.stdin.end();
    }
    this.waiting++;
    this.updateRef();
    let timer: NodeJS.Timeout | undefined;
    try {
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), this.closeWaitMs);
      });
      if ((await Promise.race([this.exited, late])) === "late") {
        this.child.kill("SIGKILL");
        await this.exited;
      }
    } finally {
      clearTimeout(timer);
      this.waiting--;
      this.updateRef();
    }
  }
}

export { QuietusNotFound };
