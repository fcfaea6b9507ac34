"""quietus: run commands under a watchdog that ends their whole process tree only when it
has truly stalled — no output, no file activity, no descendant CPU, no network bytes — and says
why.

- :func:`run` — ``subprocess.run`` with an idle timeout instead of a blind one.
- :class:`Client` / :class:`AsyncClient` — many supervised processes through
  ``quietus serve`` (sync and thread-safe / asyncio).
- :func:`find_quietus_bin` — the path of the ``quietus`` binary this package ships.
"""

from __future__ import annotations

from ._async import AsyncClient, AsyncProcess
from ._client import Client, Process
from ._errors import (
    ClientClosed,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    ProcessIdTaken,
    QuietusError,
    QuietusNotFound,
    Rejected,
    RpcError,
    ServerDied,
    SpawnFailed,
    StdinBacklog,
    StdinClosed,
    TooManyProcesses,
    UnknownProcess,
    Unsupported,
)
from ._find import find_quietus_bin
from ._run import run
from ._types import (
    SOURCES,
    Activity,
    CalledProcessError,
    Closed,
    DiagnosedProcess,
    Diagnosis,
    Duration,
    Event,
    Exited,
    IdleWarning,
    InputWait,
    Log,
    Observation,
    Observed,
    Outcome,
    Output,
    ProcessInfo,
    ProcessResult,
    Result,
    RunOutcome,
    ServerInfo,
    Snapshot,
    Source,
    StallKind,
    Started,
    State,
    Stream,
    UnknownEvent,
)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("quietus")
    except Exception:  # not installed (a source checkout on sys.path)
        return "0+unknown"


__version__: str = _version()

__all__ = [
    "__version__",
    "run",
    "Result",
    "Diagnosis",
    "DiagnosedProcess",
    "Log",
    "Duration",
    "Outcome",
    "RunOutcome",
    "StallKind",
    "Stream",
    "State",
    "Source",
    "SOURCES",
    "Client",
    "Process",
    "AsyncClient",
    "AsyncProcess",
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
    "find_quietus_bin",
    "QuietusError",
    "QuietusNotFound",
    "CalledProcessError",
    "ClientClosed",
    "ServerDied",
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "SpawnFailed",
    "ProcessIdTaken",
    "TooManyProcesses",
    "UnknownProcess",
    "StdinBacklog",
    "StdinClosed",
    "Unsupported",
    "Rejected",
]
