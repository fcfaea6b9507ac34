"""``quietus.AsyncClient``: an asyncio client of ``quietus serve``."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import subprocess
from collections import deque
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Collection,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

from . import _protocol as P
from ._client import _fresh
from ._errors import (
    ClientClosed,
    QuietusError,
    QuietusNotFound,
    ServerDied,
    UnknownProcess,
    rpc_error,
)
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

__all__ = ["AsyncClient", "AsyncProcess"]

_log = logging.getLogger("quietus.serve")
_ids = itertools.count(1)
# A line of the server: answers carry whole reports; 64 MiB is the protocol's own limit.
_LINE_LIMIT = 64 << 20

PathLike = Union[str, "os.PathLike[str]"]


class AsyncProcess:
    """A process started by :meth:`AsyncClient.start`; the methods of :class:`Process`, as
    coroutines, and ``async for event in process.events()``."""

    def __init__(self, client: "AsyncClient", process_id: str, pid: int) -> None:
        self._client = client
        #: The id the process was started under.
        self.process_id = process_id
        #: The program's pid (and process group).
        self.pid = pid

    def __repr__(self) -> str:
        return f"<quietus.AsyncProcess {self.process_id!r} pid={self.pid}>"

    async def _call(self, method: str, **params: Any) -> Any:
        return await self._client._call(method, {"processId": self.process_id, **params})

    async def write(self, data: Union[bytes, str]) -> None:
        """Writes ``data`` to its stdin or terminal (see :meth:`Process.write`)."""
        result = await self._client._call("process/write", P.write_params(self.process_id, data))
        P.stdin_status(self.process_id, result)

    async def close_stdin(self) -> None:
        """Closes its stdin after the writes before (a terminal gets end-of-file)."""
        P.stdin_status(self.process_id, await self._call("process/closeStdin"))

    async def resize(self, rows: int, cols: int) -> bool:
        """Resizes its terminal; :class:`Unsupported` for a process without one."""
        result = await self._call("process/resize", rows=int(rows), cols=int(cols))
        return P.action_status(self.process_id, result, "resize")

    async def terminate(self, *, force: bool = False, grace: Optional[Duration] = None) -> bool:
        """Ends its tree: its own ladder, ``grace`` between TERM and KILL, or KILL now."""
        params = P.terminate_params(self.process_id, force, grace)
        result = await self._client._call("process/terminate", params)
        return P.action_status(self.process_id, result, "terminate")

    @overload
    async def wait(self, timeout: None = None) -> ProcessResult: ...

    @overload
    async def wait(self, timeout: Duration) -> Optional[ProcessResult]: ...

    async def wait(self, timeout: Optional[Duration] = None) -> Optional[ProcessResult]:
        """Its report once it has ended, or None when it still runs after ``timeout`` (never
        None without a timeout)."""
        params: Dict[str, Any] = {}
        if timeout is not None:
            params["timeoutMs"] = to_millis(timeout, "timeout")
        result = await self._call("process/wait", **params)
        return None if result.get("running") else ProcessResult.from_json(result)

    async def snapshot(self) -> Snapshot:
        """Its retained output (head and tail) and byte counts."""
        return P.snapshot_from_json(await self._call("process/snapshot"))

    async def _control(self, action: Mapping[str, Any]) -> bool:
        """Sends a ``process/control`` action: the typed methods' one way."""
        result = await self._call("process/control", action=dict(action))
        return P.action_status(self.process_id, result, "control")

    async def keepalive(self, idle_timeout: Optional[Duration] = None) -> bool:
        """Counts as activity (and replaces the idle timeout when one is given)."""
        return await self._control(P.control_action("keepalive", idle_timeout))

    async def interrupt(self) -> bool:
        """Ctrl-C: through its terminal, or SIGINT to its process group."""
        return await self._control(P.control_action("send_ctrl_c"))

    async def kill(self) -> bool:
        """KILL its whole tree now."""
        return await self._control(P.control_action("force_kill"))

    async def set_idle_timeout(self, idle_timeout: Duration) -> bool:
        """Replaces its idle timeout."""
        return await self._control(P.control_action("set_idle_timeout", idle_timeout))

    async def events(self, timeout: Optional[Duration] = None) -> AsyncIterator[Event]:
        """Its events in the server's order, up to and including :class:`Closed`
        (``timeout``: for each one, ``TimeoutError``)."""
        limit = None if timeout is None else to_millis(timeout, "timeout") / 1000.0
        while True:
            event = await self._client._next_event(self.process_id, limit)
            if event is None:
                return
            yield event
            if isinstance(event, Closed):
                return


class AsyncClient:
    """The asyncio twin of :class:`Client`: ``async with quietus.AsyncClient() as
    client:`` starts ``quietus serve``; leaving the block (or ``await client.close()``)
    ends every process and the server. Use it from one event loop."""

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
        self._binary = resolve_binary(quietus_bin)
        self._argv = P.server_argv(
            self._binary,
            max_processes,
            retain_bytes,
            shutdown_grace,
            output_throttle,
            output_notifications,
            log_dir,
        )
        grace = P.seconds(shutdown_grace) if shutdown_grace is not None else 5.0
        self._close_wait = (grace or 0.0) + 20.0
        self._env = env
        self._cwd = cwd
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._pending: Dict[int, "asyncio.Future[Any]"] = {}
        self._events: Dict[str, P.EventBuffer] = {}
        self._changed: Optional[asyncio.Condition] = None
        self._ids = itertools.count(1)
        self._closed = False
        self._gone: Optional[QuietusError] = None
        self._stderr: Deque[str] = deque(maxlen=50)
        self._tasks: List["asyncio.Task[None]"] = []
        self.server_info: Optional[ServerInfo] = None

    async def open(self) -> "AsyncClient":
        """Starts the server (``async with`` does it)."""
        if self._proc is not None:
            return self
        if self._closed:
            raise ClientClosed("the client is closed: make a new AsyncClient")
        self._changed = asyncio.Condition()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
                limit=_LINE_LIMIT,
            )
        except FileNotFoundError as e:
            raise QuietusNotFound(f"cannot run the quietus binary {self._binary!r}: {e}") from e
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read()), loop.create_task(self._read_stderr())]
        try:
            self.server_info = P.server_info_from_json(await self._call("initialize", {}))
        except BaseException:
            await self.close()
            raise
        return self

    @property
    def server_pid(self) -> int:
        """The pid of the ``quietus serve`` process."""
        if self._proc is None:
            raise ClientClosed("the client is not open: use `async with` or `await open()`")
        return self._proc.pid

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            raw = await self._proc.stderr.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\n")
            self._stderr.append(line)
            _log.warning("%s", line)

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while True:
                line = await self._proc.stdout.readline()
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    _log.error("quietus serve wrote a line that is not JSON: %r", line[:200])
                    continue
                if isinstance(message, dict):
                    await self._dispatch(message)
        except (OSError, ValueError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # The loop is ending with the client open (asyncio.run's end cancels every task):
            # the server's stdin is closed, so that it ends every process and exits.
            if not self._closed:
                self._closed = True
                self._close_stdin()
            raise
        finally:
            await self._server_gone()

    def _close_stdin(self) -> None:
        try:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.close()
        except (OSError, RuntimeError):
            pass

    async def _dispatch(self, message: Dict[str, Any]) -> None:
        if "method" in message and "id" not in message:
            event = P.event_of(message)
            buffer = self._events.get(event.process_id) if event is not None else None
            if buffer is not None and event is not None:
                buffer.push(event)
                assert self._changed is not None
                async with self._changed:
                    self._changed.notify_all()
            return
        request_id = message.get("id")
        future = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(rpc_error(message["error"]))
        else:
            future.set_result(message.get("result"))

    async def _server_gone(self) -> None:
        assert self._proc is not None
        try:
            code: Optional[int] = await asyncio.wait_for(self._proc.wait(), 5)
        except asyncio.TimeoutError:
            code = None
        if self._closed:
            error: QuietusError = ClientClosed("the client is closed")
        else:
            said = "\n".join(self._stderr)
            error = ServerDied(
                f"quietus serve (pid {self._proc.pid}) ended (exit status {code})"
                + (f"; it said:\n{said}" if said else "")
                + "\nStart a new AsyncClient.",
                code,
                said,
            )
        self._gone = error
        pending = list(self._pending.values())
        self._pending.clear()
        for future in pending:
            if not future.done():
                future.set_exception(_fresh(error))
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    def _failure(self) -> QuietusError:
        if self._closed:
            return ClientClosed("the client is closed: make a new AsyncClient")
        if self._gone is not None:
            return _fresh(self._gone)
        return ClientClosed("the client is not open: use `async with` or `await open()`")

    async def _call(
        self,
        method: str,
        params: Mapping[str, Any],
        before_send: Optional[Callable[[], None]] = None,
    ) -> Any:
        if self._closed or self._gone is not None or self._proc is None:
            raise self._failure()
        assert self._proc.stdin is not None
        request_id = next(self._ids)
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        if before_send is not None:
            before_send()
        try:
            # write() is synchronous: lines never interleave; drain() bounds the buffer.
            self._proc.stdin.write(P.encode_line(request_id, method, params))
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError, OSError, RuntimeError) as e:
            self._pending.pop(request_id, None)
            if not self._closed and self._tasks:
                # The server is gone: its reader says how (exit status, last words), soon.
                await asyncio.wait({self._tasks[0]}, timeout=10)
            if self._gone is not None or self._closed:
                raise self._failure() from e
            raise ServerDied(
                f"quietus serve (pid {self._proc.pid}) does not read its input: {e}"
            ) from e
        return await future

    async def _next_event(self, process_id: str, timeout: Optional[float]) -> Optional[Event]:
        assert self._changed is not None or self._proc is None
        if self._changed is None:
            raise self._failure()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        async with self._changed:
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
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no event of process {process_id!r} within {timeout} s")
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except asyncio.TimeoutError:
                    pass

    async def start(
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
    ) -> AsyncProcess:
        """Starts ``argv``; the parameters are :meth:`Client.start`'s."""
        if process_id is None:
            process_id = f"py{os.getpid()}-a{next(_ids)}"
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
        pid_key: str = process_id
        fresh = P.EventBuffer(self._event_buffer_bytes)
        replaced: List[Optional[P.EventBuffer]] = []

        def install() -> None:
            old = self._events.get(pid_key)
            if old is None or old.closed_seen:
                replaced.append(old)
                self._events[pid_key] = fresh

        try:
            result = await self._call("process/start", params, before_send=install)
        except BaseException:
            if replaced and self._events.get(pid_key) is fresh:
                if replaced[0] is None:
                    del self._events[pid_key]
                else:
                    self._events[pid_key] = replaced[0]
            raise
        return AsyncProcess(self, pid_key, int(result.get("pid", 0)))

    def process(self, process_id: str) -> AsyncProcess:
        """The handle of a process this client started (``UnknownProcess`` if none)."""
        if process_id not in self._events:
            raise UnknownProcess(-32003, f"this client started no process {process_id!r}")
        return AsyncProcess(self, process_id, 0)

    async def list(self) -> List[ProcessInfo]:
        """Every process the server still holds."""
        return P.list_from_json(await self._call("process/list", {}))

    async def call(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        """Sends any request and returns its raw result."""
        return await self._call(method, dict(params or {}))

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def close(self) -> None:
        """Ends every process still running and the server; waits for both."""
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        if proc is None:
            return
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()
        self._close_stdin()
        try:
            await asyncio.wait_for(proc.wait(), self._close_wait)
        except asyncio.TimeoutError:
            _log.error("quietus serve (pid %d) did not end; killing it", proc.pid)
            proc.kill()
            await proc.wait()
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, 10)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass

    async def __aenter__(self) -> "AsyncClient":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
