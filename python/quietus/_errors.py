"""The exceptions of the quietus package."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "QuietusError",
    "QuietusNotFound",
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


class QuietusError(Exception):
    """The base class of every error this package raises (but ``TypeError``/``ValueError``
    for bad arguments, raised before anything runs)."""


class QuietusNotFound(QuietusError, FileNotFoundError):
    """The ``quietus`` binary could not be found (the message says where it was looked for)."""


class ClientClosed(QuietusError):
    """The client was closed: open a new ``Client``."""


class ServerDied(QuietusError):
    """The ``quietus serve`` process ended (or its pipes closed) while the client was open.

    ``returncode`` is its exit status (None if unknown), ``stderr`` the end of what it said."""

    def __init__(self, message: str, returncode: Optional[int] = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


class RpcError(QuietusError):
    """An error answer of ``quietus serve``: ``code``, ``message``, ``data``."""

    code: int = 0

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ParseError(RpcError):
    """-32700: the server could not read a line as JSON."""


class InvalidRequest(RpcError):
    """-32600: not a request object."""


class MethodNotFound(RpcError):
    """-32601: no such method (an older server?)."""


class InvalidParams(RpcError, ValueError):
    """-32602: a parameter is missing or invalid; the message names it and what it accepts."""


class SpawnFailed(RpcError):
    """-32000: the program could not be started. ``kind`` is the failed step: ``not_found``,
    ``program``, ``working_dir``, ``home``, ``log_dir``, ``terminal``, ``pipe``, ``thread``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.kind: Optional[str] = data.get("kind") if isinstance(data, dict) else None


class ProcessIdTaken(RpcError):
    """-32001: a process with this process id is still known to the server."""


class TooManyProcesses(RpcError):
    """-32002: the server's limit of live processes is reached (``Client(max_processes=…)``)."""


class UnknownProcess(RpcError):
    """-32003 (or an ``unknown_process`` status): the server knows no process with this id."""


class StdinBacklog(RpcError):
    """-32004: the child does not read its stdin; 256 writes already wait, or one waited 5 s."""


class StdinClosed(QuietusError):
    """A write to (or close of) a stdin that is closed, or a process started without
    ``stdin=True``/``pty``."""


class Unsupported(QuietusError):
    """The action does not apply to this process (``resize`` of a process without a terminal)."""


class Rejected(QuietusError):
    """The server rejected a control action; the message is its note."""


_BY_CODE: Dict[int, Type[RpcError]] = {
    -32700: ParseError,
    -32600: InvalidRequest,
    -32601: MethodNotFound,
    -32602: InvalidParams,
    -32000: SpawnFailed,
    -32001: ProcessIdTaken,
    -32002: TooManyProcesses,
    -32003: UnknownProcess,
    -32004: StdinBacklog,
}


def rpc_error(error: Any) -> RpcError:
    """The typed exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return RpcError(0, f"malformed error answer: {error!r}")
    code = error.get("code")
    message = str(error.get("message", ""))
    cls = _BY_CODE.get(code, RpcError) if isinstance(code, int) else RpcError
    return cls(code if isinstance(code, int) else 0, message, error.get("data"))
