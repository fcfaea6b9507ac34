"""The values the package returns: results, diagnoses, logs, snapshots and events."""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, AnyStr, Dict, Generic, List, Literal, Optional, Union, cast

from ._errors import QuietusError

__all__ = [
    "Duration",
    "Outcome",
    "RunOutcome",
    "StallKind",
    "Stream",
    "State",
    "Source",
    "SOURCES",
    "Diagnosis",
    "DiagnosedProcess",
    "Log",
    "Result",
    "CalledProcessError",
    "ProcessResult",
    "Snapshot",
    "ServerInfo",
    "ProcessInfo",
    "Event",
    "Started",
    "Output",
    "Activity",
    "IdleWarning",
    "InputWait",
    "Observation",
    "Observed",
    "Exited",
    "Closed",
    "UnknownEvent",
]

#: A duration: seconds (int or float) or a ``datetime.timedelta``.
Duration = Union[int, float, timedelta]

# The protocol's enums, as ``quietus serve --schema`` (docs/serve.schema.json) lists them; a
# test (python/tests/test_schema.py) fails when they differ.

#: How a supervised run ended (the schema's ``Outcome``).
Outcome = Literal["exited", "completed", "idle_timeout", "hard_timeout", "terminated", "input_wait"]
#: :func:`quietus.run`'s outcome: an :data:`Outcome`, or ``not_started`` (the program could
#: not be run).
RunOutcome = Union[Outcome, Literal["not_started"]]
#: What a stalled tree was doing (the schema's ``StallKind``, a diagnosis's ``kind``).
StallKind = Literal[
    "awaiting_input",
    "network_wait",
    "sleeping",
    "stopped",
    "waiting_on_child",
    "lock_wait",
    "disk_wait",
    "running",
    "unknown",
]
#: Which of the child's streams (the schema's ``Stream``).
Stream = Literal["stdout", "stderr", "combined", "terminal"]
#: Where a process is in its life (the schema's ``State``).
State = Literal["running", "grace", "ended"]
#: An activity source that can be turned off (``sources=`` of :func:`quietus.run` and of the
#: clients' ``start``); keepalives and probes always count.
Source = Literal["output", "files", "children", "network"]
#: Every :data:`Source`: the default of ``sources=``.
SOURCES: "frozenset[Source]" = frozenset(("output", "files", "children", "network"))


def to_millis(value: Duration, name: str) -> int:
    """``value`` in whole milliseconds (a positive value under 1 ms counts as 1 ms)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise TypeError(
            f"{name} must be seconds (int or float) or a datetime.timedelta, not {value!r}"
        )
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
    ms = seconds * 1000.0
    return int(math.ceil(ms)) if 0 < ms < 1 else int(round(ms))


def _seconds(ms: Any) -> Optional[float]:
    return ms / 1000.0 if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None


@dataclass(frozen=True)
class DiagnosedProcess:
    """One process of a stalled tree as the diagnosis saw it."""

    pid: int
    name: str
    state: str
    wchan: Optional[str] = None
    syscall: Optional[str] = None
    fd: Optional[int] = None
    target: Optional[str] = None


@dataclass(frozen=True)
class Diagnosis:
    """What a tree judged stalled was doing: ``kind`` (a :data:`StallKind`:
    ``awaiting_input``, ``network_wait``, ``sleeping``, ``stopped``, ``waiting_on_child``,
    ``lock_wait``, ``disk_wait``, ``running`` — busy with no progress any source could see —,
    ``unknown``), a one-line ``summary`` and the ``processes``."""

    kind: StallKind
    summary: str
    processes: List[DiagnosedProcess] = field(default_factory=list)

    @classmethod
    def from_json(cls, value: Any) -> Optional["Diagnosis"]:
        if not isinstance(value, dict):
            return None
        processes = []
        for p in value.get("processes") or []:
            if isinstance(p, dict):
                processes.append(
                    DiagnosedProcess(
                        pid=p.get("pid", 0),
                        name=p.get("name", ""),
                        state=p.get("state", ""),
                        wchan=p.get("wchan"),
                        syscall=p.get("syscall"),
                        fd=p.get("fd"),
                        target=p.get("target"),
                    )
                )
        kind = cast(StallKind, str(value.get("kind", "unknown")))
        return cls(kind, str(value.get("summary", "")), processes)


@dataclass(frozen=True)
class Observation:
    """Observe mode (``observe=True``): a moment quietus would have ended the run. ``at``:
    seconds after the start; ``outcome``: ``idle_timeout``, ``hard_timeout``, ``input_wait``
    or ``completed``; ``why``: in the summary line's words; ``diagnosis``: what the tree was
    doing (an idle timeout, an input wait), as for a real end."""

    at: float
    outcome: str
    why: str
    diagnosis: Optional[Diagnosis] = None

    @classmethod
    def from_json(cls, value: Any) -> Optional["Observation"]:
        if not isinstance(value, dict):
            return None
        at = value.get("at_ms", value.get("atMs"))
        return cls(
            at=_seconds(at) or 0.0,
            outcome=str(value.get("outcome", "")),
            why=str(value.get("why", "")),
            diagnosis=Diagnosis.from_json(value.get("diagnosis")),
        )

    @classmethod
    def list_from_json(cls, value: Any) -> List["Observation"]:
        return [o for o in (cls.from_json(v) for v in value or []) if o is not None]


@dataclass(frozen=True)
class Log:
    """The complete log of one stream (written once it passed 4 KiB): ``path``, ``sha256`` (of
    every byte read from the stream) and ``bytes``; ``incomplete`` with an ``error`` when the
    file lacks part of it."""

    stream: Stream
    path: str
    sha256: str
    bytes: int
    written: int
    incomplete: bool
    error: Optional[str] = None

    @classmethod
    def list_from_json(cls, value: Any) -> List["Log"]:
        logs = []
        for entry in value or []:
            if isinstance(entry, dict):
                logs.append(
                    cls(
                        stream=cast(Stream, str(entry.get("stream", ""))),
                        path=str(entry.get("path", "")),
                        sha256=str(entry.get("sha256", "")),
                        bytes=int(entry.get("bytes") or 0),
                        written=int(entry.get("written") or 0),
                        incomplete=bool(entry.get("incomplete")),
                        error=entry.get("error"),
                    )
                )
        return logs


@dataclass(frozen=True)
class Result(Generic[AnyStr]):
    """What :func:`quietus.run` returns, in the shape of ``subprocess.CompletedProcess``
    (``args``, ``returncode``, ``stdout``, ``stderr``, :meth:`check_returncode`): ``stdout``
    and ``stderr`` are ``bytes``, or ``str`` with ``run(text=True)`` or an ``encoding``.

    - ``returncode``: the ``quietus`` command's status: the command's own exit code, 124
      when it was ended for being idle or past the hard timeout, 0 when the work was done
      (``done_when_output``), 128+N when it died of signal N that quietus did not send,
      125 for quietus's own failure, 126/127 when the program cannot be run or is not found.
    - ``outcome``: ``exited``, ``idle_timeout``, ``hard_timeout``, ``input_wait``,
      ``completed``, ``terminated`` or ``not_started``.
    - ``diagnosis``: why a stalled tree was judged stalled (None otherwise).
    - ``stdout``/``stderr``: the head and the tail of the output (``stdout_omitted`` /
      ``stderr_omitted`` bytes of the middle are left out; 0 when all of it is there). With
      ``pty=True`` the terminal's output is ``stdout``.
    - ``logs``: the complete logs of the streams that passed 4 KiB, with their SHA-256.
    - ``duration``: seconds from the start to the end of the run (quietus's measure).
    - ``report``: the command's whole ``--report`` (``idle_ms``, ``ladder``, ``containment``…).
    - ``observed``: with ``observe=True``, each moment quietus would have ended the run
      (:class:`Observation`); the outcome and ``returncode`` are then the command's own.
    """

    args: List[Any]
    returncode: int
    outcome: RunOutcome
    diagnosis: Optional[Diagnosis]
    stdout: AnyStr
    stderr: AnyStr
    stdout_omitted: int
    stderr_omitted: int
    logs: List[Log]
    duration: float
    signal: Optional[int]
    pid: Optional[int]
    error: Optional[str]
    report: Dict[str, Any] = field(repr=False)
    observed: List[Observation] = field(default_factory=list)

    def check_returncode(self) -> None:
        """Raises :class:`quietus.CalledProcessError` when ``returncode`` is not 0."""
        if self.returncode != 0:
            raise CalledProcessError(self)

    def log(self, stream: str) -> Optional[Log]:
        """The log of ``stream`` (``stdout``, ``stderr``, ``terminal``), if one was written."""
        for entry in self.logs:
            if entry.stream == stream:
                return entry
        return None


@dataclass(frozen=True)
class ProcessResult:
    """``Process.wait()``'s answer for a finished process: the command's report.

    ``exit_code`` is the command's status (the child's own code, 124 after a timeout, 128+N
    after signal N it did not get from quietus); ``report`` is the whole report (camelCase
    keys, as the server sends it); ``observed``: with ``observe=True``, each moment quietus
    would have ended it."""

    process_id: str
    outcome: Outcome
    exit_code: int
    signal: Optional[int]
    duration: float
    diagnosis: Optional[Diagnosis]
    logs: List[Log]
    pid: Optional[int]
    report: Dict[str, Any] = field(repr=False)
    observed: List[Observation] = field(default_factory=list)

    @property
    def returncode(self) -> int:
        """The same as ``exit_code``, as ``subprocess`` names it."""
        return self.exit_code

    @classmethod
    def from_json(cls, value: Dict[str, Any]) -> "ProcessResult":
        return cls(
            process_id=str(value.get("processId", "")),
            outcome=cast(Outcome, str(value.get("outcome", ""))),
            exit_code=int(value.get("exitCode", 0)),
            signal=value.get("signal"),
            duration=_seconds(value.get("durationMs")) or 0.0,
            diagnosis=Diagnosis.from_json(value.get("diagnosis")),
            logs=Log.list_from_json(value.get("log")),
            pid=value.get("pid"),
            report=value,
            observed=Observation.list_from_json(value.get("observed")),
        )


@dataclass(frozen=True)
class Snapshot:
    """``Process.snapshot()``: the retained output of a process (head, an omission marker,
    tail; None for a stream the process does not have), and byte counts per stream."""

    process_id: str
    running: bool
    exit_code: Optional[int]
    stdout: Optional[bytes]
    stderr: Optional[bytes]
    terminal: Optional[bytes]
    truncated: bool
    omitted: Dict[str, Optional[int]]
    total_bytes: Dict[str, Optional[int]]


@dataclass(frozen=True)
class ServerInfo:
    """The server's ``initialize`` answer: ``name``, ``version`` and its ``capabilities``."""

    name: str
    version: str
    capabilities: Dict[str, Any]


@dataclass(frozen=True)
class ProcessInfo:
    """One entry of ``Client.list()``."""

    process_id: str
    pid: int
    state: State
    uptime: float
    idle_left: Optional[float]
    bytes: int
    log: Optional[str]
    cmd: str


# ---- events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A notification about one process. ``context`` is the object given to ``start``."""

    process_id: str
    context: Optional[Dict[str, Any]]


@dataclass(frozen=True)
class Started(Event):
    """The process runs (always the first event)."""

    pid: int


@dataclass(frozen=True)
class Output(Event):
    """Output read from a stream (``stdout``, ``stderr``, ``terminal``): at most 4 KiB per
    event and stream per throttle interval; ``seq`` counts per stream (events left out
    included); ``truncated`` says events were left out before this one. The complete output is
    in ``snapshot()`` and the logs."""

    seq: int
    stream: Stream
    data: bytes
    truncated: bool


@dataclass(frozen=True)
class Activity(Event):
    """A source (``output``, ``files``, ``children``, ``network``…) saw activity."""

    source: str


@dataclass(frozen=True)
class IdleWarning(Event):
    """Quiet for 80 % of the idle timeout; ``left`` seconds remain."""

    left: float


@dataclass(frozen=True)
class InputWait(Event):
    """The input-wait timeout ends the process: ``pid``/``name`` waits on ``target``."""

    pid: Optional[int]
    name: Optional[str]
    target: Optional[str]
    waited: Optional[float]


@dataclass(frozen=True)
class Observed(Event):
    """Observe mode (``observe=True``): quietus would have ended the process now; it goes on."""

    observation: Observation


@dataclass(frozen=True)
class Exited(Event):
    """The process ended (exactly once): ``outcome``, ``exit_code`` (the child's own code,
    None when a signal ended it), ``signal``."""

    outcome: Outcome
    exit_code: Optional[int]
    signal: Optional[int]


@dataclass(frozen=True)
class Closed(Event):
    """Its output is drained: the last event."""


@dataclass(frozen=True)
class UnknownEvent(Event):
    """A notification this version of the package does not know (a newer server)."""

    method: str
    params: Dict[str, Any]


def event_from_json(method: str, params: Dict[str, Any], decode: Any) -> Event:
    """The typed event of a notification (``decode``: base64 to bytes)."""
    pid = str(params.get("processId", ""))
    context = params.get("context")
    if method == "process/started":
        return Started(pid, context, params.get("pid", 0))
    if method == "process/output":
        data = decode(params.get("data") or "")
        return Output(
            pid,
            context,
            params.get("seq", 0),
            cast(Stream, str(params.get("stream", ""))),
            data,
            bool(params.get("truncated")),
        )
    if method == "process/activity":
        return Activity(pid, context, str(params.get("source", "")))
    if method == "process/idleWarning":
        return IdleWarning(pid, context, _seconds(params.get("leftMs")) or 0.0)
    if method == "process/inputWait":
        return InputWait(
            pid,
            context,
            params.get("pid"),
            params.get("name"),
            params.get("target"),
            _seconds(params.get("waitedMs")),
        )
    if method == "process/observed":
        return Observed(pid, context, Observation.from_json(params) or Observation(0.0, "", ""))
    if method == "process/exited":
        return Exited(
            pid,
            context,
            cast(Outcome, str(params.get("outcome", ""))),
            params.get("exitCode"),
            params.get("signal"),
        )
    if method == "process/closed":
        return Closed(pid, context)
    return UnknownEvent(pid, context, method, dict(params))


class CalledProcessError(QuietusError, subprocess.CalledProcessError):
    """``run(check=True)`` of a command whose status was not 0.

    A ``subprocess.CalledProcessError`` (``returncode``, ``cmd``, ``output``, ``stderr``) that
    also carries the whole :class:`Result`, its ``outcome`` and ``diagnosis`` (why a stalled
    command was judged stalled)."""

    def __init__(self, result: Result[Any]) -> None:
        subprocess.CalledProcessError.__init__(
            self, result.returncode, result.args, result.stdout, result.stderr
        )
        self.result = result
        self.outcome: str = result.outcome
        self.diagnosis: Optional[Diagnosis] = result.diagnosis

    def __str__(self) -> str:
        text = subprocess.CalledProcessError.__str__(self)
        if self.outcome not in ("exited",):
            text += f" (outcome {self.outcome})"
        if self.diagnosis is not None:
            text += f"; diagnosis: {self.diagnosis.summary}"
        if self.result.error:
            text += f"; {self.result.error}"
        return text
