"""quietus.run(): subprocess.run under the quietus command."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import pytest

import quietus
from conftest import processes_with, wait_until_gone


def test_a_quick_command_gives_its_status_and_output() -> None:
    result = quietus.run(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert result.returncode == 3
    assert result.outcome == "exited"
    assert result.stdout == b"out\n"
    assert result.stderr == b"err\n"
    assert (result.stdout_omitted, result.stderr_omitted) == (0, 0)
    assert result.diagnosis is None
    assert result.duration >= 0
    assert result.pid is not None and result.pid > 0
    assert result.args == ["bash", "-c", "echo out; echo err >&2; exit 3"]
    assert result.report["bytes"] == {"stdout": 4, "stderr": 4}


def test_a_stalled_command_is_ended_with_124_and_a_diagnosis(marker: str) -> None:
    # sleep(1) sleeps in clock_nanosleep (Python 3.9's time.sleep polls no descriptor with
    # pselect6, which the diagnosis calls "unknown").
    env = dict(os.environ, SWPYTEST_MARKER=marker)
    result = quietus.run(
        ["bash", "-c", "echo ready; exec sleep 120"], idle_timeout=timedelta(seconds=1), env=env
    )
    assert result.returncode == 124
    assert result.outcome == "idle_timeout"
    assert result.stdout == b"ready\n"
    assert result.diagnosis is not None
    assert result.diagnosis.kind == "sleeping", result.diagnosis
    assert result.diagnosis.summary
    assert any(p.state == "sleeping" for p in result.diagnosis.processes)
    assert result.duration >= 1.0
    assert processes_with(marker) == []


def test_observe_ends_nothing_and_says_when_it_would_have(marker: str) -> None:
    # Silent for 3 s under a 1 s idle timeout: observed, not ended; its own status.
    env = dict(os.environ, SWPYTEST_MARKER=marker)
    result = quietus.run(
        ["bash", "-c", "echo x; sleep 3; echo y; exit 4"], idle_timeout=1, observe=True, env=env
    )
    assert (result.returncode, result.outcome) == (4, "exited"), result
    assert result.stdout == b"x\ny\n"
    assert result.observed, result.report
    first = result.observed[0]
    assert isinstance(first, quietus.Observation)
    assert first.outcome == "idle_timeout"
    assert first.at >= 1.0
    assert first.why.startswith("ended after 1s idle (")
    assert first.diagnosis is not None and first.diagnosis.summary
    assert result.report["ladder"]["signals_sent"] == []
    assert processes_with(marker) == []
    # Without it: nothing observed, and the same command is ended.
    assert quietus.run(["true"]).observed == []


def test_check_raises_a_called_process_error_that_carries_the_diagnosis() -> None:
    with pytest.raises(quietus.CalledProcessError) as caught:
        quietus.run(["bash", "-c", "echo ready; sleep 120"], idle_timeout=1, check=True)
    error = caught.value
    assert isinstance(error, subprocess.CalledProcessError)
    assert error.returncode == 124
    assert error.outcome == "idle_timeout"
    assert error.diagnosis is not None and error.diagnosis.kind in ("sleeping", "waiting_on_child")
    assert error.output == b"ready\n"
    assert "diagnosis" in str(error)
    # check=True with status 0 returns normally.
    assert quietus.run(["true"], check=True).returncode == 0


def test_the_hard_timeout_ends_a_busy_command() -> None:
    loop = "while :; do echo tick; sleep 0.1; done"
    result = quietus.run(["bash", "-c", loop], idle_timeout=60, hard_timeout=1.5)
    assert result.returncode == 124
    assert result.outcome == "hard_timeout"
    assert result.stdout.startswith(b"tick\n")
    assert result.duration >= 1.5


def test_done_when_output_ends_the_work_with_0() -> None:
    result = quietus.run(
        ["bash", "-c", "echo working; echo ALL-DONE; sleep 120"],
        done_when_output=r"^ALL-DONE$",
        linger=0.2,
    )
    assert result.returncode == 0
    assert result.outcome == "completed"
    assert b"ALL-DONE" in result.stdout


# The 50 MB writer, and the same bytes computed here: 50 chunks of 1 MiB, each its index.
WRITER = textwrap.dedent(
    """
    import sys
    for i in range(50):
        sys.stdout.buffer.write(b"%08d" % i * 131072)
    """
)


def expected_sha256() -> str:
    digest = hashlib.sha256()
    for i in range(50):
        digest.update(b"%08d" % i * 131072)
    return digest.hexdigest()


def test_50_mb_of_output_keeps_memory_bounded_and_the_log_is_complete(log_dir: str) -> None:
    # Run in a fresh interpreter, so that its peak RSS is this run's alone.
    probe = textwrap.dedent(
        f"""
        import json, re, sys
        import quietus
        result = quietus.run([sys.executable, "-c", {WRITER!r}], log_dir={log_dir!r})
        log = result.log("stdout")
        print(json.dumps({{
            "returncode": result.returncode,
            "kept": len(result.stdout),
            "omitted": result.stdout_omitted,
            "head": result.stdout[:16].decode(),
            "tail": result.stdout[-16:].decode(),
            "log": None if log is None else [log.path, log.sha256, log.bytes, log.incomplete],
            # VmHWM: this image's peak (ru_maxrss keeps the peak of the pre-exec parent).
            "hwm_kib": int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read())[1]),
        }}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, timeout=300
    )
    seen = json.loads(out.stdout)
    assert seen["returncode"] == 0
    total = 50 * (1 << 20)
    assert seen["kept"] == 1 << 20  # the default capture: 512 KiB head + 512 KiB tail
    assert seen["kept"] + seen["omitted"] == total
    assert seen["head"] == "0000000000000000"
    assert seen["tail"] == "0000004900000049"
    # Bounded: the interpreter, the package and about 2 MiB of buffers, never the 50 MB.
    assert seen["hwm_kib"] < 40 * 1024, seen
    path, sha256, size, incomplete = seen["log"]
    assert size == total and not incomplete
    assert sha256 == expected_sha256()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == sha256
    assert os.path.dirname(path) == log_dir


def test_a_grandchild_holding_the_pipe_does_not_hang_the_run(marker: str) -> None:
    holder = f"import time; time.sleep(120)  # {marker}"
    script = f'{sys.executable} -c "{holder}" & echo started'
    result = quietus.run(["bash", "-c", script], idle_timeout=60)
    assert result.returncode == 0
    assert result.stdout == b"started\n"
    # Well before the holder's 120 s: the run ended when bash did.
    assert result.duration < 60
    wait_until_gone(marker)


def test_input_is_the_commands_stdin() -> None:
    data = bytes(range(256)) * 1200  # 300 KiB: more than a pipe holds
    reverse = "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[::-1])"
    result = quietus.run([sys.executable, "-c", reverse], input=data)
    assert result.returncode == 0
    assert result.stdout == data[::-1]
    text = quietus.run(["cat"], input="héllo\n")
    assert text.stdout == "héllo\n".encode()


def test_without_input_stdin_is_empty() -> None:
    result = quietus.run(["bash", "-c", "cat; echo end"], idle_timeout=10)
    assert result.stdout == b"end\n"


def test_pty_runs_the_command_on_a_terminal() -> None:
    script = 'test -t 0 && test -t 1 && echo "tty $(stty size)"; read line; echo "got $line"'
    result = quietus.run(["bash", "-c", script], pty=True, pty_size=(30, 100), input=b"hi\n")
    assert result.returncode == 0, result
    assert b"tty 30 100" in result.stdout, result.stdout
    assert b"got hi\r\n" in result.stdout
    assert result.stderr == b""
    assert result.report["bytes"]["terminal"] > 0  # a terminal run has one stream


def test_a_program_that_does_not_exist_is_127_not_started() -> None:
    result = quietus.run(["no-such-program-xyz"])
    assert result.returncode == 127
    assert result.outcome == "not_started"
    assert result.error
    with pytest.raises(quietus.CalledProcessError):
        quietus.run(["no-such-program-xyz"], check=True)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"args": []}, ValueError),
        ({"args": ["true"], "idle_timeout": -1}, ValueError),
        ({"args": ["true"], "idle_timeout": "5m"}, TypeError),
        ({"args": ["true"], "hard_timeout": float("nan")}, ValueError),
        ({"args": ["true"], "input": 5}, TypeError),
        ({"args": ["true"], "capture_bytes": -1}, ValueError),
        ({"args": [5]}, TypeError),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(kwargs, error) -> None:  # type: ignore[no-untyped-def]
    args = kwargs.pop("args")
    with pytest.raises(error):
        quietus.run(args, **kwargs)


def test_quietuss_own_failure_is_an_error_with_its_message() -> None:
    with pytest.raises(quietus.QuietusError) as caught:
        quietus.run(["true"], extra_args=["--signal", "NOPE"])
    assert "NOPE" in str(caught.value) or "signal" in str(caught.value)


def test_an_option_quietus_refuses_is_an_error_naming_it() -> None:
    with pytest.raises(quietus.QuietusError) as caught:
        quietus.run(["true"], idle_timeout=timedelta(days=30))
    assert "idle" in str(caught.value), caught.value


def test_a_missing_binary_is_a_clear_error() -> None:
    with pytest.raises(quietus.QuietusNotFound) as caught:
        quietus.run(["true"], quietus_bin="/nonexistent/quietus")
    assert "/nonexistent/quietus" in str(caught.value)


def test_ctrl_c_in_the_caller_ends_the_tree_then_propagates(marker: str) -> None:
    script = textwrap.dedent(
        f"""
        import os, quietus
        env = dict(os.environ, SWPYTEST_MARKER={marker!r})
        try:
            quietus.run(["bash", "-c", "sleep 300 & exec sleep 300"], env=env, idle_timeout=600)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        """
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        # Ready once both sleeps run (the caller, quietus and the tree carry the marker).
        while len([p for p in processes_with(marker) if p != caller.pid]) < 3:
            assert time.monotonic() < deadline, "the tree did not start"
            time.sleep(0.05)
        caller.send_signal(signal.SIGINT)  # to the caller alone, as a harness's own Ctrl-C handler
        out, err = caller.communicate(timeout=60)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    assert out == b"interrupted\n", err
    assert b"KeyboardInterrupt" in err
    wait_until_gone(marker)
