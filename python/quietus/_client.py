"""``quietus.Client``: a thread-safe client of ``quietus serve``."""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import threading
import time
import weakref
from collections import deque
from typing import (
    IO,
    Any,
    Callable,
    Collection,
    Deque,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

from . import _protocol as P
from ._errors import ClientClosed, QuietusError, QuietusNotFound, ServerDied, rpc_error
from ._find import resolve_binary
from ._types import (
    Closed,
    Duration,
    Event,
    ProcessInfo,
    ProcessResult,
    ServerInfo,
    Snapshot,
    Source,
    to_millis,
)

__all__ = ["Client", "Process"]

_log = logging.getLogger("quietus.serve")
_ids = itertools.count(1)

PathLike = Union[str, "os.PathLike[str]"]


def _read_stderr(stream: Optional[IO[bytes]], said: Deque[str]) -> None:
    """The server's own messages: kept (the last 50 lines, for ServerDied) and logged."""
    assert stream is not None
    for raw in stream:
        line = raw.decode(errors="replace").rstrip("\n")
        said.append(line)
        _log.warning("%s", line)


def _read_stdout(ref: "weakref.ReferenceType[Client]", stream: Optional[IO[bytes]]) -> None:
    """The server's lines, to the client while it exists; then says the server is gone."""
    assert stream is not None
    try:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                _log.error("quietus serve wrote a line that is not JSON: %r", line[:200])
                continue
            client = ref()
            if client is None:
                return
            if isinstance(message, dict):
                client._dispatch(message)
            del client
    except (OSError, ValueError):
        pass
    finally:
        client = ref()
        if client is not None:
            client._server_gone()


def _abandon(proc: "subprocess.Popen[bytes]") -> None:
    """A client collected without close(): the end of the server's stdin ends every process
    and the server (which exits by itself)."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except (OSError, ValueError):
        pass


def _fresh(error: QuietusError) -> QuietusError:
    """A copy of a shared error, so that each thread raises its own (its own traceback)."""
    if isinstance(error, ServerDied):
        return ServerDied(str(error), error.returncode, error.stderr)
    return type(error)(*error.args)


class _Pending:
    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None


class Process:
    """A process started by :meth:`Client.start`: every per-process method of the protocol.

    Methods that act on the process return ``True`` when done and ``False`` when the process
    had already ended; an unknown process raises :class:`UnknownProcess`."""

    def __init__(self, client: "Client", process_id: str, pid: int) -> None:
        self._client = client
        #: The id the process was started under.
        self.process_id = process_id
        #: The program's pid (and process group).
        self.pid = pid

    def __repr__(self) -> str:
        return f"<quietus.Process {self.process_id!r} pid={self.pid}>"

    def _call(self, method: str, **params: Any) -> Any:
        return self._client._call(method, {"processId": self.process_id, **params})

    def write(self, data: Union[bytes, str]) -> None:
        """Writes ``data`` (bytes, or str as UTF-8) to the process's stdin (or types it into its
        terminal), in order with the other writes. Raises :class:`StdinClosed` when its stdin
        is closed, :class:`StdinBacklog` when the child does not read it."""
        P.stdin_status(
            self.process_id,
            self._client._call("process/write", P.write_params(self.process_id, data)),
        )

    def close_stdin(self) -> None:
        """Closes its stdin after the writes before (a terminal gets end-of-file)."""
        P.stdin_status(self.process_id, self._call("process/closeStdin"))

    def resize(self, rows: int, cols: int) -> bool:
        """Resizes its terminal; :class:`Unsupported` for a process without one."""
        result = self._call("process/resize", rows=int(rows), cols=int(cols))
        return P.action_status(self.process_id, result, "resize")

    def terminate(self, *, force: bool = False, grace: Optional[Duration] = None) -> bool:
        """Ends its tree: its own kill ladder, ``grace`` between TERM and KILL, or KILL now
        (``force=True``)."""
        result = self._client._call(
            "process/terminate", P.terminate_params(self.process_id, force, grace)
        )
        return P.action_status(self.process_id, result, "terminate")

    @overload
    def wait(self, timeout: None = None) -> ProcessResult: ...

    @overload
    def wait(self, timeout: Duration) -> Optional[ProcessResult]: ...

    def wait(self, timeout: Optional[Duration] = None) -> Optional[ProcessResult]:
        """Waits until it has ended (at most ``timeout``) and returns its report, or None when
        it still runs after ``timeout``. Without a timeout it returns only once it has ended:
        its report, never None (the type says so)."""
        params: Dict[str, Any] = {}
        if timeout is not None:
            params["timeoutMs"] = to_millis(timeout, "timeout")
        result = self._call("process/wait", **params)
        if result.get("running"):
            return None
        return ProcessResult.from_json(result)

    def snapshot(self) -> Snapshot:
        """Its retained output (head and tail) and byte counts."""
        return P.snapshot_from_json(self._call("process/snapshot"))

    def _control(self, action: Mapping[str, Any]) -> bool:
        """Sends a ``process/control`` action (``{"type": …}``): the typed methods' one way."""
        return P.action_status(
            self.process_id, self._call("process/control", action=dict(action)), "control"
        )

    def keepalive(self, idle_timeout: Optional[Duration] = None) -> bool:
        """Counts as activity (and replaces the idle timeout when one is given)."""
        return self._control(P.control_action("keepalive", idle_timeout))

    def interrupt(self) -> bool:
        """Ctrl-C: through its terminal, or SIGINT to its process group."""
        return self._control(P.control_action("send_ctrl_c"))

    def kill(self) -> bool:
        """KILL its whole tree now."""
        return self._control(P.control_action("force_kill"))

    def set_idle_timeout(self, idle_timeout: Duration) -> bool:
        """Replaces its idle timeout."""
        return self._control(P.control_action("set_idle_timeout", idle_timeout))

    def events(self, timeout: Optional[Duration] = None) -> Iterator[Event]:
        """Its notifications as typed events, in the server's order, up to and including
        :class:`Closed`; ``timeout`` bounds the wait for each one (``TimeoutError``).

        Each event goes to one iterator: iterate a process's events in one place. Events of a
        process nobody iterates are kept (output beyond 4 MiB is dropped, and the next output
        event says ``truncated``)."""
        limit = None if timeout is None else to_millis(timeout, "timeout") / 1000.0
        while True:
            event = self._client._next_event(self.process_id, limit)
            if event is None:
                return
            yield event
            if isinstance(event, Closed):
                return


class Client:
    """A ``quietus serve`` of its own, and its processes; a context manager.

    ``with quietus.Client() as client:`` starts the server; leaving the block (or
    :meth:`close`) ends every process it still runs (their kill ladder, the grace cut to
    ``shutdown_grace``) and the server. Several threads may use one client. If this Python
    process dies, the server sees its stdin close and ends every process too.

    The options are ``quietus serve``'s (``max_processes``, ``retain_bytes`` per process
    and stream, ``shutdown_grace``, ``output_throttle``, ``output_notifications``: ``"all"``,
    ``"none"`` or program names, ``log_dir``); ``env``/``cwd`` are the server's, which its
    processes inherit. ``event_buffer_bytes``: the output data kept per process for
    :meth:`Process.events` while nobody iterates them (beyond it output events are dropped and
    the next one says ``truncated``; the complete output is in ``snapshot()`` and the logs).

    Raises:
        QuietusNotFound: no ``quietus`` binary.
        ServerDied: the server did not start (its message is in the exception).
    """

    def __init__(
        self,
        *,
        max_processes: Optional[int] = None,
        retain_bytes: Optional[int] = None,
        shutdown_grace: Optional[Duration] = None,
        output_throttle: Optional[Duration] = None,
        output_notifications: Optional[Union[str, Sequence[str]]] = None,
        log_dir: Optional[PathLike] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[PathLike] = None,
        event_buffer_bytes: int = P.EVENT_BYTES_LIMIT,
        quietus_bin: Optional[str] = None,
    ) -> None:
        self._event_buffer_bytes = P.event_buffer_bytes(event_buffer_bytes)
        binary = resolve_binary(quietus_bin)
        argv = P.server_argv(
            binary,
            max_processes,
            retain_bytes,
            shutdown_grace,
            output_throttle,
            output_notifications,
            log_dir,
        )
        grace = P.seconds(shutdown_grace) if shutdown_grace is not None else 5.0
        self._close_wait = (grace or 0.0) + 20.0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        self._pending: Dict[int, _Pending] = {}
        self._events: Dict[str, P.EventBuffer] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._gone: Optional[QuietusError] = None
        self._stderr: Deque[str] = deque(maxlen=50)
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as e:
            raise QuietusNotFound(f"cannot run the quietus binary {binary!r}: {e}") from e
        # The threads hold the client weakly: a client nobody holds any more is collected, and
        # its finalizer closes the server's stdin, so that the server ends every process.
        self._err_reader = threading.Thread(
            target=_read_stderr,
            args=(self._proc.stderr, self._stderr),
            name="quietus-client-stderr",
            daemon=True,
        )
        self._reader = threading.Thread(
            target=_read_stdout,
            args=(weakref.ref(self), self._proc.stdout),
            name="quietus-client-reader",
            daemon=True,
        )
        self._finalizer = weakref.finalize(self, _abandon, self._proc)
        self._err_reader.start()
        self._reader.start()
        try:
            self.server_info: ServerInfo = P.server_info_from_json(self._call("initialize", {}))
        except BaseException:
            self.close()
            raise

    # ---- the connection --------------------------------------------------------------------

    @property
    def server_pid(self) -> int:
        """The pid of the ``quietus serve`` process."""
        return self._proc.pid

    def _dispatch(self, message: Dict[str, Any]) -> None:
        if "method" in message and "id" not in message:
            event = P.event_of(message)
            if event is None:
                return
            with self._lock:
                buffer = self._events.get(event.process_id)
                if buffer is not None:
                    buffer.push(event)
                    self._changed.notify_all()
            return
        request_id = message.get("id")
        with self._lock:
            pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None:
            return
        if "error" in message:
            pending.error = rpc_error(message["error"])
        else:
            pending.result = message.get("result")
        pending.done.set()

    def _server_gone(self) -> None:
        # Its stdout closed: it exited (or is exiting).
        try:
            code: Optional[int] = self._proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self._err_reader.join(2)
        with self._lock:
            if self._closed:
                error: QuietusError = ClientClosed("the client is closed")
            else:
                said = "\n".join(self._stderr)
                error = ServerDied(
                    f"quietus serve (pid {self._proc.pid}) ended (exit status {code})"
                    + (f"; it said:\n{said}" if said else "")
                    + "\nStart a new Client.",
                    code,
                    said,
                )
            self._gone = error
            pending = list(self._pending.values())
            self._pending.clear()
            self._changed.notify_all()
        for p in pending:
            p.error = _fresh(error)
            p.done.set()

    def _failure(self) -> QuietusError:
        if self._closed:
            return ClientClosed("the client is closed: start a new Client")
        assert self._gone is not None
        return _fresh(self._gone)

    def _send(self, line: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            # The server is gone: its reader says how (exit status, last words), soon.
            if threading.current_thread() is not self._reader:
                self._reader.join(10)
            with self._lock:
                gone = self._gone
            if gone is not None:
                raise _fresh(gone) from e
            raise ServerDied(
                f"quietus serve (pid {self._proc.pid}) does not read its input: {e}"
            ) from e

    def _call(
        self,
        method: str,
        params: Mapping[str, Any],
        before_send: Optional[Callable[[], None]] = None,
    ) -> Any:
        pending = _Pending()
        with self._write_lock:
            with self._lock:
                if self._closed or self._gone is not None:
                    raise self._failure()
                request_id = next(self._ids)
                self._pending[request_id] = pending
                if before_send is not None:
                    before_send()
            try:
                self._send(P.encode_line(request_id, method, params))
            except BaseException:
                with self._lock:
                    self._pending.pop(request_id, None)
                raise
        # The server answers every request; a dead server fails every pending one.
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _next_event(self, process_id: str, timeout: Optional[float]) -> Optional[Event]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                buffer = self._events.get(process_id)
                if buffer is None:
                    return None
                event = buffer.pop()
                if event is not None:
                    return event
                if buffer.closed_taken:
                    return None
                if self._closed or self._gone is not None:
                    raise self._failure()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no event of process {process_id!r} within {timeout} s")
                self._changed.wait(left)

    # ---- the methods -----------------------------------------------------------------------

    def start(
        self,
        argv: Sequence[PathLike],
        *,
        process_id: Optional[str] = None,
        cwd: Optional[PathLike] = None,
        env: Optional[Mapping[str, str]] = None,
        isolated_env: bool = False,
        inherit_env: Optional[Sequence[str]] = None,
        home: Optional[PathLike] = None,
        seed: Optional[Sequence[Tuple[str, str]]] = None,
        stdin: bool = False,
        pty: P.PtySize = False,
        idle_timeout: Optional[Duration] = None,
        hard_timeout: Optional[Duration] = None,
        input_wait_timeout: Optional[Duration] = None,
        input_wait_notice: Optional[Duration] = None,
        grace: Optional[Duration] = None,
        drain_cap: Optional[Duration] = None,
        log_threshold: Optional[int] = None,
        watch: Optional[Sequence[PathLike]] = None,
        sources: Optional[Collection[Source]] = None,
        context: Optional[Mapping[str, Any]] = None,
        observe: bool = False,
    ) -> Process:
        """Starts ``argv`` under supervision and returns its :class:`Process`.

        ``process_id`` (default: a fresh one) names it in every call and event. ``env`` is
        added to the server's environment (with ``isolated_env=True``: only ``inherit_env``,
        default ``["PATH"]``, plus ``env``; ``home``/``seed``: an isolated home folder).
        ``stdin=True`` opens a pipe for :meth:`Process.write`; ``pty=True`` or ``(rows,
        cols)`` runs it on a terminal. Durations are seconds or timedeltas; unset ones are
        the library's defaults (idle 5 min). ``drain_cap``: after it exits, how long at most
        to read output from pipes a leftover process still holds open (default 2 s).
        ``sources``: the activity sources that count (default all of :data:`quietus.SOURCES`:
        ``output``, ``files``, ``children``, ``network``). ``context`` is copied onto its every
        event.
        ``observe=True``: nothing is ended for a stall or a timeout; an :class:`Observed` event
        and the result's ``observed`` say when and why it would have been.

        Raises:
            ProcessIdTaken, TooManyProcesses, SpawnFailed (``.kind``), InvalidParams.
        """
        if process_id is None:
            process_id = f"py{os.getpid()}-{next(_ids)}"
        params = P.start_params(
            process_id,
            argv,
            cwd=cwd,
            env=env,
            isolated_env=isolated_env,
            inherit_env=inherit_env,
            home=home,
            seed=seed,
            stdin=stdin,
            pty=pty,
            idle_timeout=idle_timeout,
            hard_timeout=hard_timeout,
            input_wait_timeout=input_wait_timeout,
            input_wait_notice=input_wait_notice,
            grace=grace,
            drain_cap=drain_cap,
            log_threshold=log_threshold,
            watch=watch,
            sources=sources,
            context=context,
            observe=observe,
        )
        replaced: List[Optional[P.EventBuffer]] = []
        fresh = P.EventBuffer(self._event_buffer_bytes)

        def install() -> None:  # under the lock, sent right after: in the server's order
            old = self._events.get(process_id)
            if old is None or old.closed_seen:
                replaced.append(old)
                self._events[process_id] = fresh

        try:
            result = self._call("process/start", params, before_send=install)
        except BaseException:
            with self._lock:
                if replaced and self._events.get(process_id) is fresh:
                    if replaced[0] is None:
                        del self._events[process_id]
                    else:
                        self._events[process_id] = replaced[0]
            raise
        return Process(self, process_id, int(result.get("pid", 0)))

    def process(self, process_id: str) -> Process:
        """The handle of a process this client started (``UnknownProcess`` if none)."""
        with self._lock:
            known = process_id in self._events
        if not known:
            from ._errors import UnknownProcess

            raise UnknownProcess(-32003, f"this client started no process {process_id!r}")
        info = [p for p in self.list() if p.process_id == process_id]
        return Process(self, process_id, info[0].pid if info else 0)

    def list(self) -> List[ProcessInfo]:
        """Every process the server still holds (running, or finished less than 10 min ago)."""
        return P.list_from_json(self._call("process/list", {}))

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        """Sends any request and returns its raw result (typed errors as for the methods)."""
        return self._call(method, dict(params or {}))

    # ---- the end ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Ends every process still running (their ladder, grace cut to ``shutdown_grace``)
        and the server; waits for both. Calls made after raise :class:`ClientClosed`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._changed.notify_all()
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            self._proc.wait(self._close_wait)
        except subprocess.TimeoutExpired:
            _log.error("quietus serve (pid %d) did not end; killing it", self._proc.pid)
            self._proc.kill()
            self._proc.wait()
        self._reader.join(10)
        self._err_reader.join(10)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
