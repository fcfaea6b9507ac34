// The errors of the quietus package: the server's error answers as classes, by the codes of
// the protocol description (src/protocol.ts, generated).

import { ErrorCodes, type ErrorName, type SpawnErrorKind, SpawnErrorKinds } from "./protocol";

/** The base class of every error this package throws (but `TypeError`/`RangeError` for bad
 * arguments, thrown before anything runs, and an `AbortSignal`'s reason). */
export class QuietusError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The quietus binary could not be found: the message says why and how to repair it. */
export class QuietusNotFound extends QuietusError {
  /** The platform package that was looked for, when one was. */
  readonly platformPackage: string | undefined;
  constructor(message: string, platformPackage?: string) {
    super(message);
    this.platformPackage = platformPackage;
  }
}

/** The client was closed: open a new `Client`. */
export class ClientClosed extends QuietusError {}

/** The `quietus serve` process ended (or its pipes closed) while the client was open. */
export class ServerDied extends QuietusError {
  /** Its exit code, or null (it died of a signal, or is unknown). */
  readonly exitCode: number | null;
  /** The signal it died of, or null. */
  readonly signal: NodeJS.Signals | null;
  /** The end of what it wrote on stderr. */
  readonly stderr: string;
  constructor(message: string, exitCode: number | null, signal: NodeJS.Signals | null, stderr: string) {
    super(message);
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderr = stderr;
  }
}

/** An error answer of `quietus serve`: `code`, `message`, `data`, and the code's name. */
export class RpcError extends QuietusError {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** The code's name in the protocol (`spawn_failed`, `unknown_process`…), or undefined for
   * a code this version does not know. */
  readonly errorName: ErrorName | undefined;
  /** The error's `data`, as the server sent it. */
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.code = code;
    this.errorName = nameOf(code);
    this.data = data;
  }
}

/** -32700: the server could not read a line as JSON. */
export class ParseError extends RpcError {}
/** -32600: not a request object. */
export class InvalidRequest extends RpcError {}
/** -32601: no such method (an older server?). */
export class MethodNotFound extends RpcError {}
/** -32602: a parameter is missing or invalid; the message names it and what it accepts. */
export class InvalidParams extends RpcError {}
/** -32000: the program could not be started; `kind` is the failed step. */
export class SpawnFailed extends RpcError {
  /** The failed step (`not_found`, `program`, `working_dir`, `home`, `log_dir`, `terminal`,
   * `pipe`, `thread`), or undefined when the server named none this version knows. */
  readonly kind: SpawnErrorKind | undefined;
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
    const kind = (data as { kind?: unknown } | null | undefined)?.kind;
    this.kind = (SpawnErrorKinds as readonly unknown[]).includes(kind) ? (kind as SpawnErrorKind) : undefined;
  }
}
/** -32603: the server failed inside (a thread it could not start…); the message says what. */
export class InternalError extends RpcError {}
/** -32001: a process with this process id is still known to the server. */
export class ProcessIdTaken extends RpcError {}
/** -32002: the server's limit of live processes is reached (`maxProcesses`). */
export class TooManyProcesses extends RpcError {}
/** -32003 (or an `unknown_process` status): the server knows no process with this id. */
export class UnknownProcess extends RpcError {}
/** -32004: the child does not read its stdin; 256 writes already wait, or one waited 5 s. */
export class StdinBacklog extends RpcError {}

/** A write to (or close of) a stdin that is closed, or of a process started without
 * `stdin: true` or a terminal. */
export class StdinClosed extends QuietusError {}
/** The action does not apply to this process (`resize` of a process without a terminal). */
export class Unsupported extends QuietusError {}
/** The server rejected a control action; the message is its note. */
export class Rejected extends QuietusError {}

type RpcErrorClass = new (code: number, message: string, data?: unknown) => RpcError;

/** The class of each error code of the protocol: a code the description adds without a class
 * here fails the build (the record must name every one). */
const CLASSES: Record<ErrorName, RpcErrorClass> = {
  parse_error: ParseError,
  invalid_request: InvalidRequest,
  method_not_found: MethodNotFound,
  invalid_params: InvalidParams,
  internal_error: InternalError,
  spawn_failed: SpawnFailed,
  duplicate_process: ProcessIdTaken,
  too_many_processes: TooManyProcesses,
  unknown_process: UnknownProcess,
  stdin_backlog: StdinBacklog,
};

function nameOf(code: number): ErrorName | undefined {
  for (const [name, value] of Object.entries(ErrorCodes) as [ErrorName, number][]) {
    if (value === code) return name;
  }
  return undefined;
}

/** The typed error of a JSON-RPC `error` object. */
export function rpcError(error: unknown): RpcError {
  if (!error || typeof error !== "object") {
    return new RpcError(0, `malformed error answer: ${JSON.stringify(error)}`);
  }
  const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
  const text = typeof message === "string" ? message : JSON.stringify(message);
  if (typeof code !== "number") return new RpcError(0, text, data);
  const name = nameOf(code);
  const cls = name ? CLASSES[name] : RpcError;
  return new cls(code, text, data);
}
