// quietus: run a command and end its whole process tree only once it has truly stalled, and
// say why. `run()` (the command, in place of `child_process.execFile` with a timeout) and
// `Client` (a typed client of `quietus serve`).

export { run, CalledProcessError } from "./run";
export type { RunOptions, RunResult, Report, Diagnosis } from "./run";
export { Client, Process } from "./client";
export type {
  ClientOptions,
  StartOptions,
  StartParams,
  CallOptions,
  ProcessEvent,
  ProcessResult,
  ProcessInfo,
  ServerInfo,
  Snapshot,
} from "./client";
export * from "./errors";
export { findBinary, PLATFORMS, packageName, BINARY_PATH_VARIABLE } from "./platform";
export type { Platform } from "./platform";
export * as protocol from "./protocol";
export type { Outcome, StallKind, Stream, State } from "./protocol";
