"""quietus.Client: the sync, thread-safe client of `quietus serve`."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Dict, List

import pytest

import quietus
from conftest import processes_with, wait_until_gone


def check_order(events: List[quietus.Event], process_id: str) -> Dict[str, bytes]:
    """The protocol's order for one process; returns the output per stream."""
    assert events, "no events"
    assert all(e.process_id == process_id for e in events)
    assert isinstance(events[0], quietus.Started), events[0]
    assert isinstance(events[-1], quietus.Closed), events[-1]
    assert sum(isinstance(e, quietus.Exited) for e in events) == 1
    assert sum(isinstance(e, quietus.Closed) for e in events) == 1
    output: Dict[str, bytes] = {}
    last_seq: Dict[str, int] = {}
    for e in events:
        if isinstance(e, quietus.Output):
            assert e.seq > last_seq.get(e.stream, -1), (e, last_seq)
            last_seq[e.stream] = e.seq
            output[e.stream] = output.get(e.stream, b"") + e.data
    return output


def test_start_write_wait_events_snapshot_list() -> None:
    with quietus.Client() as client:
        assert client.server_info.name == "quietus"
        assert client.server_info.version == quietus.__version__
        process = client.start(
            ["bash", "-c", 'read name; echo "hello $name"; echo warn >&2'],
            stdin=True,
            idle_timeout=60,
            context={"step": 7},
        )
        assert process.pid > 0
        process.write("reader\n")
        process.close_stdin()
        result = process.wait()
        assert result is not None
        assert (result.outcome, result.exit_code, result.returncode) == ("exited", 0, 0)
        events = list(process.events(timeout=30))
        output = check_order(events, process.process_id)
        assert output == {"stdout": b"hello reader\n", "stderr": b"warn\n"}
        assert all(e.context == {"step": 7} for e in events)
        snapshot = process.snapshot()
        assert snapshot.stdout == b"hello reader\n" and snapshot.terminal is None
        assert snapshot.running is False and snapshot.exit_code == 0
        listed = {p.process_id: p for p in client.list()}
        assert listed[process.process_id].pid == process.pid
        # A closed stdin says so.
        with pytest.raises(quietus.StdinClosed):
            process.write(b"more")


def test_notifications_come_in_the_protocols_order() -> None:
    echo = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)"
    with quietus.Client(output_throttle=0) as client:
        process = client.start([sys.executable, "-c", echo], stdin=True, idle_timeout=60)
        for i in range(20):
            process.write(f"line {i}\n")
        process.close_stdin()
        events = list(process.events(timeout=30))
        output = check_order(events, process.process_id)
        expected = "".join(f"LINE {i}\n" for i in range(20)).encode()
        assert output["stdout"] == expected
        exited = [e for e in events if isinstance(e, quietus.Exited)][0]
        assert (exited.outcome, exited.exit_code) == ("exited", 0)
        # Iterating again after Closed ends at once.
        assert list(process.events(timeout=1)) == []


def test_twenty_processes_from_four_threads() -> None:
    errors: List[BaseException] = []
    results: Dict[int, bytes] = {}
    lock = threading.Lock()
    with quietus.Client() as client:
        barrier = threading.Barrier(4)

        def worker(t: int) -> None:
            try:
                barrier.wait(30)
                processes = [
                    (
                        t * 5 + i,
                        client.start(["bash", "-c", 'echo "n=$1"; sleep 0.2', "_", str(t * 5 + i)]),
                    )
                    for i in range(5)
                ]
                for n, process in processes:
                    result = process.wait()
                    assert result is not None and result.exit_code == 0
                    output = check_order(list(process.events(timeout=30)), process.process_id)
                    with lock:
                        results[n] = output.get("stdout", b"")
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        assert results == {n: f"n={n}\n".encode() for n in range(20)}
        assert len({p.process_id for p in client.list()}) >= 20


def test_control_terminate_and_kill(marker: str) -> None:
    sleeper = [
        sys.executable,
        "-c",
        f"import time; print('up', flush=True); time.sleep(120)  # {marker}",
    ]
    with quietus.Client() as client:
        a = client.start(sleeper, idle_timeout=60)
        # Its SIGINT handler is in place once it printed (Ctrl-C at start-up may exit 1).
        assert next(
            e for e in a.events(timeout=30) if isinstance(e, quietus.Output)
        ).data.startswith(b"up")
        assert a.keepalive() is True
        assert a.keepalive(idle_timeout=90) is True
        assert a.set_idle_timeout(30) is True
        assert a.wait(timeout=0.2) is None  # still running
        assert a.interrupt() is True
        result = a.wait()
        assert result is not None and result.exit_code == 130  # Python's KeyboardInterrupt
        assert a.interrupt() is False  # already over
        assert a.terminate() is False
        b = client.start(sleeper, idle_timeout=60)
        assert b.terminate(grace=1) is True
        assert b.wait() is not None
        c = client.start(sleeper, idle_timeout=60)
        assert c.kill() is True
        result = c.wait()
        assert result is not None and result.signal == 9
        with pytest.raises(quietus.Unsupported):
            client.start(sleeper, idle_timeout=60).resize(40, 100)
    wait_until_gone(marker)


def test_a_stalled_process_has_its_diagnosis() -> None:
    with quietus.Client() as client:
        process = client.start(["bash", "-c", "echo up; sleep 120"], idle_timeout=1)
        result = process.wait()
        assert result is not None
        assert (result.outcome, result.exit_code) == ("idle_timeout", 124)
        assert result.diagnosis is not None and result.diagnosis.kind in (
            "sleeping",
            "waiting_on_child",
        )
        kinds = [type(e).__name__ for e in process.events(timeout=30)]
        assert "IdleWarning" in kinds


def test_observe_ends_nothing_and_sends_an_observed_event() -> None:
    with quietus.Client() as client:
        process = client.start(
            [
                "python3",
                "-c",
                "import time, sys; print('up', flush=True); time.sleep(3); sys.exit(5)",
            ],
            idle_timeout=1,
            observe=True,
        )
        result = process.wait()
        assert result is not None
        assert (result.outcome, result.exit_code) == ("exited", 5)
        assert result.observed and result.observed[0].outcome == "idle_timeout", result.report
        assert result.observed[0].at >= 1.0
        sent = [e for e in process.events(timeout=30) if isinstance(e, quietus.Observed)]
        assert [e.observation for e in sent] == result.observed


def test_pty_process() -> None:
    with quietus.Client() as client:
        script = 'test -t 0 && echo "tty $(stty size)"; read x; echo "now $(stty size), got $x"'
        process = client.start(["bash", "-c", script], pty=(30, 100))
        # It waits on its terminal until written to: the resize comes first.
        assert process.resize(40, 120) is True
        process.write("hi\n")
        result = process.wait()
        assert result is not None and result.exit_code == 0
        terminal = process.snapshot().terminal
        assert terminal is not None
        assert b"now 40 120, got hi" in terminal, terminal
        assert process.resize(10, 10) is False  # it has ended


def test_errors_are_typed() -> None:
    with quietus.Client(max_processes=1) as client:
        client.start(["sleep", "60"], process_id="only")
        with pytest.raises(quietus.ProcessIdTaken):
            client.start(["sleep", "60"], process_id="only")
        with pytest.raises(quietus.TooManyProcesses):
            client.start(["sleep", "60"])
        assert client.process("only").terminate(force=True) is True
        client.process("only").wait()
        with pytest.raises(quietus.SpawnFailed) as caught:
            client.start(["no-such-program-xyz"])
        assert caught.value.kind == "not_found"
        with pytest.raises(quietus.InvalidParams) as invalid:
            client.start(["true"], idle_timeout=0)
        assert "idleTimeoutMs" in str(invalid.value)
        with pytest.raises(quietus.UnknownProcess):
            client.call("process/wait", {"processId": "nobody"})
        with pytest.raises(quietus.MethodNotFound):
            client.call("process/nope")
        with pytest.raises(ValueError):
            client.start([])
        with pytest.raises(ValueError):
            client.start(["true"], stdin=True, pty=True)


def test_a_closed_client_raises_and_a_dead_server_is_said() -> None:
    client = quietus.Client()
    process = client.start(["sleep", "60"])
    client.close()
    with pytest.raises(quietus.ClientClosed):
        client.list()
    with pytest.raises(quietus.ClientClosed):
        process.wait()
    client.close()  # twice is fine

    client = quietus.Client()
    process = client.start(["sleep", "60"])
    os.kill(client.server_pid, signal.SIGKILL)  # the server this test started
    started = time.monotonic()
    with pytest.raises(quietus.ServerDied):
        for _ in range(1000):  # the first calls may be written before the death is seen
            process.snapshot()
            time.sleep(0.01)
    assert time.monotonic() - started < 30
    with pytest.raises(quietus.ServerDied):
        list(process.events())
    client.close()


def test_a_missing_binary_is_a_clear_error() -> None:
    with pytest.raises(quietus.QuietusNotFound):
        quietus.Client(quietus_bin="/nonexistent/quietus")


def test_a_bad_server_option_is_said() -> None:
    with pytest.raises(ValueError):
        quietus.Client(max_processes=0)
    with pytest.raises(quietus.ServerDied) as caught:
        quietus.Client(output_notifications="")
    assert caught.value.returncode == 125


@pytest.mark.parametrize("how", ["return", "exit", "sigkill"])
def test_a_client_that_goes_away_without_closing_leaves_nothing(marker: str, how: str) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys, time, quietus
        env = dict(os.environ, SWPYTEST_MARKER={marker!r})
        client = quietus.Client(env=env, shutdown_grace=1)
        for i in range(3):
            client.start([sys.executable, "-c", "import time; time.sleep(300)"], idle_timeout=600)
        print(client.server_pid, flush=True)
        sys.stdin.readline()  # the test has counted the processes
        if {how!r} == "return":
            sys.exit(0)  # the interpreter's own way out, client still open
        if {how!r} == "exit":
            os._exit(0)
        time.sleep(300)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        line = child.stdout.readline()
        assert line.strip().isdigit(), line
        # The client goes away only once they are counted: an `os._exit` right after the
        # line raced the count (the server and its processes were already gone).
        assert len(processes_with(marker)) >= 4  # the server and its three processes
        if how == "sigkill":
            child.kill()
        else:
            child.stdin.write(b"go\n")
            child.stdin.close()
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    wait_until_gone(marker)


def test_events_nobody_iterates_are_bounded() -> None:
    writer = (
        "import sys\nfor i in range(256):\n"
        "    sys.stdout.buffer.write(b'x' * 65536)\n    sys.stdout.flush()"
    )
    # 256 output events of 4 KiB each (the server's chunk): 1 MiB, 16 times the bound.
    with quietus.Client(output_throttle=0, event_buffer_bytes=64 << 10) as client:
        process = client.start([sys.executable, "-c", writer], idle_timeout=60)
        result = process.wait()  # 16 MiB written before anyone iterates
        assert result is not None and result.exit_code == 0
        time.sleep(0.5)  # let the notifications still on their way arrive (nothing asserts on time)
        events = list(process.events(timeout=30))
        output = [e for e in events if isinstance(e, quietus.Output)]
        kept = sum(len(e.data) for e in output)
        assert 0 < kept <= 64 << 10, kept
        assert isinstance(events[0], quietus.Started) and isinstance(events[-1], quietus.Closed)
        assert sum(isinstance(e, quietus.Exited) for e in events) == 1
        assert process.snapshot().total_bytes["stdout"] == 16 << 20


def test_after_dropped_output_the_next_output_event_says_truncated() -> None:
    from quietus._protocol import EventBuffer

    buffer = EventBuffer(limit=8)
    out = lambda seq, data: quietus.Output("p", None, seq, "stdout", data, False)  # noqa: E731
    buffer.push(quietus.Started("p", None, 1))
    buffer.push(out(0, b"12345678"))
    buffer.push(out(1, b"9"))  # over the limit: dropped
    buffer.push(quietus.Activity("p", None, "output"))  # dropped while output is
    buffer.push(quietus.Exited("p", None, "exited", 0, None))  # lifecycle: kept
    assert isinstance(buffer.pop(), quietus.Started)
    first = buffer.pop()
    assert isinstance(first, quietus.Output) and not first.truncated
    buffer.push(out(2, b"abc"))
    assert isinstance(buffer.pop(), quietus.Exited)
    last = buffer.pop()
    assert isinstance(last, quietus.Output) and last.seq == 2 and last.truncated
    assert buffer.pop() is None


def test_a_client_nobody_holds_any_more_ends_its_processes(marker: str) -> None:
    client = quietus.Client(shutdown_grace=1)
    for _ in range(3):
        client.start([sys.executable, "-c", f"import time; time.sleep(300)  # {marker}"])
    server = client.server_pid
    assert len(processes_with(marker)) >= 3
    del client
    gc.collect()
    wait_until_gone(marker)
    # The server ended too (a zombie of this process at most, reaped by subprocess later).
    deadline = time.monotonic() + 30
    while True:
        try:
            with open(f"/proc/{server}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, f"the server {server} still runs"
        time.sleep(0.05)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1024"])
def test_a_bad_event_buffer_is_refused_before_a_server_starts(bad: object) -> None:
    for client in (quietus.Client, quietus.AsyncClient):
        with pytest.raises(ValueError, match="event_buffer_bytes must be a whole number"):
            client(event_buffer_bytes=bad)  # type: ignore[arg-type]
