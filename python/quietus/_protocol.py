"""What the sync and asyncio clients share: requests' parameters, answers' meanings, the
bounded per-process event queue's rules and the server's command line."""

from __future__ import annotations

import base64
import json
import os
from collections import deque
from datetime import timedelta
from typing import (
    Any,
    Collection,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
    cast,
)

from ._errors import (
    Rejected,
    StdinClosed,
    UnknownProcess,
    Unsupported,
    rpc_error,
)
from ._types import (
    SOURCES,
    Activity,
    Closed,
    Duration,
    Event,
    Output,
    ProcessInfo,
    ServerInfo,
    Snapshot,
    Source,
    State,
    event_from_json,
    to_millis,
)

# Output and activity events kept for a process nobody iterates, at most (data bytes); beyond
# it they are dropped and the next output event of the stream says truncated, as the server
# does for a slow client. Lifecycle events are never dropped.
EVENT_BYTES_LIMIT = 4 << 20

StdinMode = Union[bool, str]
PtySize = Union[bool, Tuple[int, int]]


def event_buffer_bytes(value: int) -> int:
    """The clients' ``event_buffer_bytes``, checked: a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"event_buffer_bytes must be a whole number >= 0, not {value!r}")
    return value


def server_argv(
    binary: str,
    max_processes: Optional[int],
    retain_bytes: Optional[int],
    shutdown_grace: Optional[Duration],
    output_throttle: Optional[Duration],
    output_notifications: Optional[Union[str, Sequence[str]]],
    log_dir: Optional[Union[str, "os.PathLike[str]"]],
) -> List[str]:
    """``quietus serve`` with the options given."""
    argv = [binary, "serve"]
    if max_processes is not None:
        if (
            isinstance(max_processes, bool)
            or not isinstance(max_processes, int)
            or max_processes < 1
        ):
            raise ValueError(f"max_processes must be a whole number >= 1, not {max_processes!r}")
        argv += ["--max-processes", str(max_processes)]
    if retain_bytes is not None:
        if isinstance(retain_bytes, bool) or not isinstance(retain_bytes, int) or retain_bytes < 0:
            raise ValueError(f"retain_bytes must be a whole number >= 0, not {retain_bytes!r}")
        argv += ["--retain-bytes", str(retain_bytes)]
    if shutdown_grace is not None:
        argv += ["--shutdown-grace", f"{to_millis(shutdown_grace, 'shutdown_grace')}ms"]
    if output_throttle is not None:
        argv += ["--output-throttle", f"{to_millis(output_throttle, 'output_throttle')}ms"]
    if output_notifications is not None:
        if not isinstance(output_notifications, str):
            output_notifications = ",".join(output_notifications)
        argv += ["--output-notifications", output_notifications]
    if log_dir is not None:
        argv += ["--log-dir", os.fspath(log_dir)]
    return argv


def encode_line(request_id: int, method: str, params: Mapping[str, Any]) -> bytes:
    request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


def _ms(value: Optional[Duration], name: str) -> Optional[int]:
    return None if value is None else to_millis(value, name)


#: The ``process/start`` flag that turns each source off.
SOURCE_OFF_KEYS: Dict[str, str] = {
    "output": "noOutput",
    "files": "noWatch",
    "children": "noChildren",
    "network": "noNetwork",
}


def checked_sources(sources: Optional[Collection[Source]]) -> "frozenset[Source]":
    """``sources`` as a set of :data:`Source` (None: all), or a ``ValueError`` naming the
    unknown one."""
    if sources is None:
        return SOURCES
    if isinstance(sources, str):
        raise TypeError(f"sources must be a collection of source names, not the str {sources!r}")
    chosen = frozenset(sources)
    unknown = sorted(str(s) for s in chosen - SOURCES)
    if unknown:
        raise ValueError(f"unknown source {unknown[0]!r}: sources are {', '.join(sorted(SOURCES))}")
    return chosen


def start_params(
    process_id: str,
    argv: Sequence[Union[str, "os.PathLike[str]"]],
    *,
    cwd: Optional[Union[str, "os.PathLike[str]"]],
    env: Optional[Mapping[str, str]],
    isolated_env: bool,
    inherit_env: Optional[Sequence[str]],
    home: Optional[Union[str, "os.PathLike[str]"]],
    seed: Optional[Sequence[Tuple[str, str]]],
    stdin: bool,
    pty: PtySize,
    idle_timeout: Optional[Duration],
    hard_timeout: Optional[Duration],
    input_wait_timeout: Optional[Duration],
    input_wait_notice: Optional[Duration],
    grace: Optional[Duration],
    drain_cap: Optional[Duration],
    log_threshold: Optional[int],
    watch: Optional[Sequence[Union[str, "os.PathLike[str]"]]],
    sources: Optional[Collection[Source]],
    context: Optional[Mapping[str, Any]],
    observe: bool = False,
) -> Dict[str, Any]:
    """``process/start``'s parameters, checked for type (the server checks the ranges)."""
    if isinstance(argv, (str, bytes)) or not argv:
        raise ValueError(
            f"argv must be a non-empty list of the program and its arguments, not {argv!r}"
        )
    words = [os.fspath(word) for word in argv]
    if not all(isinstance(word, str) for word in words):
        raise TypeError("argv must hold str or str paths (the protocol carries UTF-8 text)")
    params: Dict[str, Any] = {"processId": process_id, "argv": words}
    if cwd is not None:
        params["cwd"] = os.fspath(cwd)
    if env is not None:
        params["env"] = {str(k): str(v) for k, v in env.items()}
    if isolated_env:
        params["envMode"] = "isolated"
    if inherit_env is not None:
        params["inheritEnv"] = [str(name) for name in inherit_env]
    if home is not None:
        params["home"] = os.fspath(home)
    if seed is not None:
        params["seed"] = [{"from": os.fspath(a), "to": os.fspath(b)} for a, b in seed]
    if pty:
        if stdin:
            raise ValueError("stdin and pty exclude each other: a terminal is the stdin")
        rows, cols = pty if isinstance(pty, tuple) else (24, 80)
        params["io"] = {"pty": {"rows": int(rows), "cols": int(cols)}}
    elif stdin:
        params["io"] = {"pipe": {"stdin": "open"}}
    for name, value in (
        ("idleTimeoutMs", _ms(idle_timeout, "idle_timeout")),
        ("hardTimeoutMs", _ms(hard_timeout, "hard_timeout")),
        ("inputWaitTimeoutMs", _ms(input_wait_timeout, "input_wait_timeout")),
        ("inputWaitNoticeMs", _ms(input_wait_notice, "input_wait_notice")),
        ("gracePeriodMs", _ms(grace, "grace")),
        ("drainCapMs", _ms(drain_cap, "drain_cap")),
    ):
        if value is not None:
            params[name] = value
    if log_threshold is not None:
        params["logThresholdBytes"] = int(log_threshold)
    if watch is not None:
        if isinstance(watch, (str, os.PathLike)):
            watch = [watch]
        params["watch"] = [os.fspath(path) for path in watch]
    for source in sorted(SOURCES - checked_sources(sources)):
        params[SOURCE_OFF_KEYS[source]] = True
    if observe:
        params["observe"] = True
    if context is not None:
        params["context"] = dict(context)
    return params


def write_params(process_id: str, data: Union[bytes, str]) -> Dict[str, Any]:
    if isinstance(data, str):
        return {"processId": process_id, "text": data}
    if isinstance(data, (bytes, bytearray, memoryview)):
        return {"processId": process_id, "data": base64.b64encode(bytes(data)).decode()}
    raise TypeError(f"data must be bytes or str, not {type(data).__name__}")


def terminate_params(process_id: str, force: bool, grace: Optional[Duration]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"processId": process_id}
    if force and grace is not None:
        raise ValueError("terminate: give force=True or grace=…, not both")
    if force:
        params["mode"] = "force"
    elif grace is not None:
        params["mode"] = {"graceful": {"timeoutMs": to_millis(grace, "grace")}}
    return params


def control_action(kind: str, duration: Optional[Duration] = None) -> Dict[str, Any]:
    if kind == "keepalive":
        action: Dict[str, Any] = {"type": "keepalive"}
        if duration is not None:
            action["extendTimeoutMs"] = to_millis(duration, "idle_timeout")
        return action
    if kind == "set_idle_timeout":
        if duration is None:
            raise ValueError("set_idle_timeout needs a duration")
        return {"type": "set_idle_timeout", "timeoutMs": to_millis(duration, "idle_timeout")}
    return {"type": kind}


def stdin_status(process_id: str, result: Any) -> None:
    status = result.get("status") if isinstance(result, dict) else None
    if status == "accepted":
        return
    if status == "unknown_process":
        raise UnknownProcess(-32003, f"unknown_process: no process has processId {process_id!r}")
    if status == "stdin_closed":
        raise StdinClosed(
            f"the stdin of process {process_id!r} is closed (closed before, the process ended, "
            "or it was started without stdin=True)"
        )
    raise rpc_error({"code": 0, "message": f"unexpected answer {result!r}"})


def action_status(process_id: str, result: Any, what: str) -> bool:
    """True: done; False: the process had already ended. Raises for the rest."""
    status = result.get("status") if isinstance(result, dict) else None
    if status in ("accepted", "ack"):
        return True
    if status == "already_terminated":
        return False
    if status in ("unknown_process", "no_such_session"):
        raise UnknownProcess(-32003, f"unknown_process: no process has processId {process_id!r}")
    note = result.get("note", "") if isinstance(result, dict) else ""
    if status == "unsupported":
        raise Unsupported(f"{what} of process {process_id!r}: {note or 'unsupported'}")
    if status == "reject":
        raise Rejected(f"{what} of process {process_id!r} rejected: {note}")
    raise rpc_error({"code": 0, "message": f"unexpected answer to {what}: {result!r}"})


def _b64(value: Any) -> Optional[bytes]:
    return base64.b64decode(value) if isinstance(value, str) else None


def snapshot_from_json(value: Dict[str, Any]) -> Snapshot:
    return Snapshot(
        process_id=str(value.get("processId", "")),
        running=bool(value.get("running")),
        exit_code=value.get("exitCode"),
        stdout=_b64(value.get("stdout")),
        stderr=_b64(value.get("stderr")),
        terminal=_b64(value.get("terminal")),
        truncated=bool(value.get("truncated")),
        omitted=dict(value.get("omitted") or {}),
        total_bytes=dict(value.get("totalBytes") or {}),
    )


def server_info_from_json(value: Dict[str, Any]) -> ServerInfo:
    info = value.get("serverInfo") or {}
    return ServerInfo(
        name=str(info.get("name", "")),
        version=str(info.get("version", "")),
        capabilities=dict(value.get("capabilities") or {}),
    )


def list_from_json(value: Dict[str, Any]) -> List[ProcessInfo]:
    processes = []
    for s in value.get("sessions") or []:
        idle_left = s.get("idleLeftMs")
        processes.append(
            ProcessInfo(
                process_id=str(s.get("processId", "")),
                pid=int(s.get("pid") or 0),
                state=cast(State, str(s.get("state", ""))),
                uptime=(s.get("uptimeMs") or 0) / 1000.0,
                idle_left=None if idle_left is None else idle_left / 1000.0,
                bytes=int(s.get("bytes") or 0),
                log=s.get("log"),
                cmd=str(s.get("cmd", "")),
            )
        )
    return processes


def event_of(message: Dict[str, Any]) -> Optional[Event]:
    params = message.get("params")
    method = message.get("method")
    if not isinstance(params, dict) or not isinstance(method, str):
        return None
    return event_from_json(method, params, base64.b64decode)


class EventBuffer:
    """The events of one process waiting to be iterated (no locking: the callers lock).

    Output events beyond ``limit`` bytes of data are dropped (activity events too while output
    is being dropped); the next output event of the same stream then says ``truncated``.
    Lifecycle events are always kept."""

    def __init__(self, limit: int = EVENT_BYTES_LIMIT) -> None:
        self.limit = limit
        self.queue: Deque[Event] = deque()
        self.bytes = 0
        self.dropped: Set[str] = set()
        self.closed_seen = False  # the Closed event arrived
        self.closed_taken = False  # and was iterated

    def push(self, event: Event) -> None:
        if isinstance(event, Output):
            if self.bytes + len(event.data) > self.limit:
                self.dropped.add(event.stream)
                return
            if event.stream in self.dropped:
                self.dropped.discard(event.stream)
                event = Output(
                    event.process_id, event.context, event.seq, event.stream, event.data, True
                )
            self.bytes += len(event.data)
        elif isinstance(event, Activity) and self.stream_dropping():
            return
        if isinstance(event, Closed):
            self.closed_seen = True
        self.queue.append(event)

    def stream_dropping(self) -> bool:
        return bool(self.dropped)

    def pop(self) -> Optional[Event]:
        if not self.queue:
            return None
        event = self.queue.popleft()
        if isinstance(event, Output):
            self.bytes -= len(event.data)
        if isinstance(event, Closed):
            self.closed_taken = True
        return event


def seconds(value: Optional[Union[float, timedelta]]) -> Optional[float]:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
