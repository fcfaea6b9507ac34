"""run() as a subprocess user expects it: sources as one set, signal.Signals, text= and
encoding=, a result with CompletedProcess's attributes; typed control methods on processes."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys

import pytest

import quietus
from quietus import _run

PY = sys.executable


def _argv(**options: object) -> list:
    defaults = {
        name: p.default
        for name, p in inspect.signature(quietus.run).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    return _run._command("quietus", "r.json", ["true"], dict(defaults, **options))


def test_sources_is_one_set_and_the_default_counts_every_source() -> None:
    assert not any(a.startswith("--no-") for a in _argv())
    argv = _argv(sources={"output"})
    assert {"--no-watch", "--no-children", "--no-network"} <= set(argv)
    assert "--no-output" not in argv
    assert "--no-output" in _argv(sources=quietus.SOURCES - {"output"})
    with pytest.raises(ValueError, match="unknown source 'disk'"):
        _argv(sources={"output", "disk"})
    with pytest.raises(TypeError, match="not the str"):
        _argv(sources="output")


def test_signal_takes_signal_signals() -> None:
    argv = _argv(signal=signal.SIGINT)
    assert argv[argv.index("--signal") + 1] == str(int(signal.SIGINT))
    argv = _argv(signal="HUP")
    assert argv[argv.index("--signal") + 1] == "HUP"


def test_text_and_encoding_give_str_as_subprocess_does(marker: str) -> None:
    code = "import sys; sys.stdout.write(sys.stdin.read().upper()); sys.stderr.write('é')"
    as_bytes = quietus.run([PY, "-c", code, marker], input="abc", idle_timeout=30)
    assert as_bytes.stdout == b"ABC" and isinstance(as_bytes.stderr, bytes)
    as_text = quietus.run([PY, "-c", code, marker], input="abc", text=True, idle_timeout=30)
    assert as_text.stdout == "ABC"
    assert isinstance(as_text.stderr, str)
    latin = quietus.run([PY, "-c", code, marker], input="abc", encoding="latin-1", idle_timeout=30)
    assert latin.stderr == "é".encode().decode("latin-1")


def test_the_result_behaves_as_a_completed_process(marker: str) -> None:
    done = quietus.run([PY, "-c", "import sys; sys.exit(3)", marker], idle_timeout=30)
    assert (done.args[0], done.returncode) == (PY, 3)
    with pytest.raises(subprocess.CalledProcessError) as raised:
        done.check_returncode()
    assert raised.value.returncode == 3
    with pytest.raises(quietus.CalledProcessError) as checked:
        quietus.run([PY, "-c", "print('x'); raise SystemExit(2)", marker], check=True, text=True)
    assert checked.value.output == "x\n", "check=True raises with the decoded output"


def test_processes_steer_through_typed_methods_only() -> None:
    for cls in (quietus.Process, quietus.AsyncProcess):
        assert not hasattr(cls, "control"), cls
        for method in ("keepalive", "interrupt", "kill", "set_idle_timeout", "terminate"):
            assert callable(getattr(cls, method)), (cls, method)
