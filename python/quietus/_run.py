"""``quietus.run()``: ``subprocess.run`` under the ``quietus`` command."""

from __future__ import annotations

import dataclasses
import errno
import json
import locale
import os
import selectors
import shutil
import signal as _signal
import subprocess
import tempfile
import time
from typing import Any, Collection, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ._errors import QuietusError, QuietusNotFound
from ._find import resolve_binary
from ._protocol import checked_sources
from ._types import (
    SOURCES,
    Diagnosis,
    Duration,
    Log,
    Observation,
    Result,
    RunOutcome,
    Source,
    to_millis,
)

__all__ = ["run"]

StrOrBytesPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# After quietus itself exited, how long its output pipes may stay open (held by a process
# that is not the program's: quietus passes none of its descriptors on).
_DRAIN_AFTER_EXIT = 5.0
_CHUNK = 1 << 16


class _HeadTail:
    """The first and the last ``limit / 2`` bytes of a stream, and how many were left out."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data or self.tail_limit == 0:
            return
        self.tail += data
        # Trimmed once it is twice the limit: amortised, memory stays within 2 x tail_limit.
        if len(self.tail) > 2 * self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    def result(self) -> Tuple[bytes, int]:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        kept = bytes(self.head) + tail
        return kept, self.total - len(kept)


def _words(args: Any) -> List[Any]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [args]
    try:
        words = list(args)
    except TypeError:
        raise TypeError(
            f"args must be a sequence of program and arguments (str, bytes or paths), not {args!r}"
        ) from None
    if not words:
        raise ValueError("args is empty: give the program and its arguments, e.g. ['make', 'test']")
    for word in words:
        if not isinstance(word, (str, bytes, os.PathLike)):
            raise TypeError(f"args must hold str, bytes or paths, not {word!r}")
    return words


def _cli_duration(value: Optional[Duration], name: str) -> str:
    if value is None:
        return "none"
    return f"{to_millis(value, name)}ms"


def _strings(value: Any, name: str) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, os.PathLike)):
        return [value]
    items = list(value)
    for item in items:
        if not isinstance(item, (str, bytes, os.PathLike)):
            raise TypeError(f"{name} must hold strings or paths, not {item!r}")
    return items


def _command(
    binary: str,
    report: str,
    words: List[Any],
    options: Dict[str, Any],
) -> List[Any]:
    """The ``quietus`` command line for ``run()``'s options."""
    argv: List[Any] = [binary, "--quiet", "--report", report]
    argv += ["--idle-timeout", _cli_duration(options["idle_timeout"], "idle_timeout")]
    argv += ["--hard-timeout", _cli_duration(options["hard_timeout"], "hard_timeout")]
    if options["grace"] is not None:
        argv += ["--grace", _cli_duration(options["grace"], "grace")]
    if options["signal"] is not None:
        sig = options["signal"]
        argv += ["--signal", str(int(sig)) if isinstance(sig, int) else str(sig)]
    for name in ("input_wait_timeout", "linger", "check_interval", "drain_cap"):
        if options[name] is not None:
            argv += ["--" + name.replace("_", "-"), _cli_duration(options[name], name)]
    # A source turned off is its --no-* flag (files: --no-watch).
    off = {"files": "--no-watch", "children": "--no-children", "network": "--no-network"}
    off["output"] = "--no-output"
    for source in sorted(SOURCES - checked_sources(options["sources"])):
        argv.append(off[source])
    for path in _strings(options["watch"], "watch"):
        argv += ["--watch", path]
    for pattern in _strings(options["done_when_output"], "done_when_output"):
        argv += ["--done-when-output", pattern]
    for path in _strings(options["done_when_file"], "done_when_file"):
        argv += ["--done-when-file", path]
    flags = ("non_interactive", "keep_leftovers", "observe")
    for flag in flags:
        if options[flag]:
            argv.append("--" + flag.replace("_", "-"))
    if options["pty"]:
        argv.append("--pty")
        size = options["pty_size"]
        if size is not None:
            rows, cols = size
            argv += ["--pty-size", f"{int(rows)}x{int(cols)}"]
    if options["containment"] is not None:
        argv += ["--containment", str(options["containment"])]
    if options["log_dir"] is not None:
        argv += ["--log-dir", options["log_dir"]]
    argv += list(options["extra_args"] or [])
    argv.append("--")
    return argv + words


def _pump(
    proc: "subprocess.Popen[bytes]",
    data: Optional[bytes],
    out: _HeadTail,
    err: _HeadTail,
) -> None:
    """Feeds stdin and reads stdout and stderr until both end (bounded after the exit)."""
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in sinks:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    view = memoryview(data) if data else memoryview(b"")
    stdin_fd = -1
    if proc.stdin is not None:
        stdin_fd = proc.stdin.fileno()
        if len(view):
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    deadline: Optional[float] = None
    try:
        while sel.get_map():
            if deadline is None and proc.poll() is not None:
                deadline = time.monotonic() + _DRAIN_AFTER_EXIT
            timeout = 0.5 if deadline is None else max(0.0, deadline - time.monotonic())
            if deadline is not None and timeout == 0.0:
                break
            for key, _ in sel.select(timeout):
                fd = key.fd
                if fd == stdin_fd:
                    try:
                        written = os.write(fd, view[:_CHUNK])
                        view = view[written:]
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, OSError):
                        view = memoryview(b"")
                    if not len(view):
                        sel.unregister(fd)
                        assert proc.stdin is not None
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError as e:
                    if e.errno != errno.EIO:
                        raise
                    chunk = b""
                if chunk:
                    sinks[fd].add(chunk)
                else:
                    sel.unregister(fd)
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


def _end(proc: "subprocess.Popen[bytes]", grace: float) -> None:
    """Tells quietus to end the program (TERM: it runs its kill ladder and writes its
    report), then waits for it; KILL after ``grace`` more seconds (its guardian then ends the
    tree)."""
    if proc.poll() is None:
        try:
            proc.send_signal(_signal.SIGTERM)
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except ProcessLookupError:
            pass


def _read_report(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        return None
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def run(
    args: Union[StrOrBytesPath, Sequence[StrOrBytesPath]],
    *,
    idle_timeout: Duration = 300,
    hard_timeout: Optional[Duration] = None,
    cwd: Optional[StrOrBytesPath] = None,
    env: Optional[Mapping[str, str]] = None,
    input: Optional[Union[bytes, str]] = None,
    pty: bool = False,
    pty_size: Optional[Tuple[int, int]] = None,
    watch: Optional[Union[StrOrBytesPath, Sequence[StrOrBytesPath]]] = None,
    done_when_output: Optional[Union[str, Sequence[str]]] = None,
    done_when_file: Optional[Union[StrOrBytesPath, Sequence[StrOrBytesPath]]] = None,
    linger: Optional[Duration] = None,
    input_wait_timeout: Optional[Duration] = None,
    check_interval: Optional[Duration] = None,
    drain_cap: Optional[Duration] = None,
    grace: Optional[Duration] = None,
    signal: Optional[Union[str, int, _signal.Signals]] = None,
    sources: Optional[Collection[Source]] = None,
    non_interactive: bool = False,
    keep_leftovers: bool = False,
    observe: bool = False,
    containment: Optional[str] = None,
    log_dir: Optional[StrOrBytesPath] = None,
    capture_bytes: int = 1 << 20,
    check: bool = False,
    text: bool = False,
    encoding: Optional[str] = None,
    errors: Optional[str] = None,
    extra_args: Optional[Sequence[str]] = None,
    quietus_bin: Optional[str] = None,
) -> Result[Any]:
    """Runs ``args`` under the ``quietus`` command and returns a :class:`Result`.

    Where ``subprocess.run(args, timeout=…)`` kills only the child after a fixed time (and
    hangs while a grandchild holds its pipes), this ends the command's whole process tree once
    it has been idle — no output, no file activity under ``watch`` (default ``.agent``), no
    CPU of its descendants, no TCP bytes — for ``idle_timeout``, or at ``hard_timeout``, and
    says why it looked stalled (``Result.diagnosis``). Durations are seconds or timedeltas.

    - ``returncode`` is the command's status (124 after a stall or the hard timeout);
      ``check=True`` raises :class:`CalledProcessError` (with the diagnosis) when it is not 0.
    - ``input`` (bytes or str) is the command's stdin, else stdin is ``/dev/null``
      (quietus runs the command in its own process group: it may not read a terminal).
    - ``text=True`` or an ``encoding`` (as for ``subprocess.run``): ``stdout``/``stderr`` are
      ``str``, decoded with ``encoding`` (default the locale's) and ``errors`` (default
      ``"replace"``: the head and the tail may cut a character); a ``str`` ``input`` is
      encoded with it (else UTF-8).
    - ``sources``: the activity sources that count (default all of :data:`quietus.SOURCES`:
      ``output``, ``files``, ``children``, ``network``); ``sources={"output"}`` is a plain
      silence timeout.
    - ``signal``: the ladder's first signal, a name (``"INT"``), a number or a
      ``signal.Signals``.
    - ``pty=True`` runs it on a terminal (``pty_size`` rows and columns, default 24x80):
      ``input`` is typed into it and its output is ``stdout``.
    - ``stdout``/``stderr`` keep the first and last ``capture_bytes / 2`` bytes each, so
      memory stays bounded whatever the command writes; the complete output of a stream past
      4 KiB is in a log (``Result.logs``: path and SHA-256) under ``log_dir`` (default: the
      user's cache folder, ``~/.cache/quietus/logs``).
    - ``env`` replaces the environment, as for ``subprocess``; ``QUIETUS_*`` variables in
      it also configure the options ``run()`` does not set itself.
    - ``done_when_output`` (regexes) and ``done_when_file``: the work is done when a line
      matches or the file appears; the command gets ``linger`` to exit by itself.
    - ``extra_args``: more options for the command line (before ``--``).
    - ``observe=True``: end nothing; ``Result.observed`` says when and why quietus would have
      ended the command, which runs to its own end (its own ``returncode``).

    Raises:
        QuietusNotFound: the ``quietus`` binary is not installed.
        QuietusError: quietus itself failed before running anything (the message is its
            own).
        CalledProcessError: ``check=True`` and the status is not 0.
        TypeError, ValueError: a bad argument (nothing is run).
    """
    words = _words(args)
    decode = text or encoding is not None or errors is not None
    chosen_encoding = encoding or (locale.getpreferredencoding(False) if decode else "utf-8")
    if isinstance(input, str):
        input = input.encode(chosen_encoding)
    if input is not None and not isinstance(input, (bytes, bytearray, memoryview)):
        raise TypeError(f"input must be bytes or str, not {type(input).__name__}")
    if isinstance(capture_bytes, bool) or not isinstance(capture_bytes, int) or capture_bytes < 0:
        raise ValueError(f"capture_bytes must be a whole number >= 0, not {capture_bytes!r}")
    if pty_size is not None and (
        len(pty_size) != 2 or not all(1 <= int(n) <= 65535 for n in pty_size)
    ):
        raise ValueError(f"pty_size must be (rows, cols), each 1..65535, not {pty_size!r}")
    if idle_timeout is None:
        raise ValueError("idle_timeout may not be None: give seconds or a timedelta")
    binary = resolve_binary(quietus_bin)
    folder = tempfile.mkdtemp(prefix="quietus-run-")
    try:
        report_path = os.path.join(folder, "report.json")
        options = dict(
            idle_timeout=idle_timeout,
            hard_timeout=hard_timeout,
            grace=grace,
            signal=signal,
            input_wait_timeout=input_wait_timeout,
            check_interval=check_interval,
            drain_cap=drain_cap,
            linger=linger,
            watch=watch,
            done_when_output=done_when_output,
            done_when_file=done_when_file,
            sources=sources,
            non_interactive=non_interactive,
            keep_leftovers=keep_leftovers,
            observe=observe,
            pty=pty,
            pty_size=pty_size,
            containment=containment,
            log_dir=log_dir,
            extra_args=extra_args,
        )
        argv = _command(binary, report_path, words, options)
        result: Result[Any] = _run(argv, words, report_path, cwd, env, input, capture_bytes, grace)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if decode:
        # The head and the tail may cut a character in two: "replace" unless told otherwise.
        how = errors or "replace"
        result = dataclasses.replace(
            result,
            stdout=result.stdout.decode(chosen_encoding, how),
            stderr=result.stderr.decode(chosen_encoding, how),
        )
    if check:
        result.check_returncode()
    return result


def _run(
    argv: List[Any],
    words: List[Any],
    report_path: str,
    cwd: Any,
    env: Optional[Mapping[str, str]],
    data: Optional[bytes],
    capture_bytes: int,
    grace: Optional[Duration],
) -> Result[bytes]:
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
    except FileNotFoundError as e:
        if e.filename == argv[0] or not cwd:
            raise QuietusNotFound(f"cannot run the quietus binary {argv[0]!r}: {e}") from e
        raise
    out, err = _HeadTail(capture_bytes), _HeadTail(capture_bytes)
    try:
        _pump(proc, bytes(data) if data is not None else None, out, err)
        proc.wait()
    except BaseException:
        # Ctrl-C in the caller, or any failure: the whole tree goes, as quietus ends it.
        wait = (to_millis(grace, "grace") / 1000.0 if grace is not None else 5.0) + 10.0
        _end(proc, wait)
        raise
    stdout, stdout_omitted = out.result()
    stderr, stderr_omitted = err.result()
    report = _read_report(report_path)
    if report is None:
        message = stderr.decode(errors="replace").strip()
        raise QuietusError(
            f"quietus exited {proc.returncode} without a report: {message or 'no message'}"
        )
    result = Result(
        args=words,
        returncode=proc.returncode if proc.returncode >= 0 else 128 - proc.returncode,
        outcome=cast(RunOutcome, str(report.get("outcome", ""))),
        diagnosis=Diagnosis.from_json(report.get("diagnosis")),
        stdout=stdout,
        stderr=stderr,
        stdout_omitted=stdout_omitted,
        stderr_omitted=stderr_omitted,
        logs=Log.list_from_json(report.get("log")),
        duration=(report.get("duration_ms") or 0) / 1000.0,
        signal=report.get("signal"),
        pid=report.get("pid"),
        error=report.get("error"),
        report=report,
        observed=Observation.list_from_json(report.get("observed")),
    )
    return result
