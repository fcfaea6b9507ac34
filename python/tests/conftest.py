"""Helpers of the Python suite: unique markers and /proc look-ups that prove nothing leaked.

The suite tests the *installed* package (a wheel installed into a fresh virtual environment by
.ci/run), never the source tree: see test_packaging.py."""

from __future__ import annotations

import os
import time
import uuid
from typing import List

import pytest


def processes_with(marker: str) -> List[int]:
    """The pids (not this one) whose command line or environment holds ``marker``."""
    needle = marker.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{name}/{part}", "rb") as f:
                    if needle in f.read():
                        found.append(int(name))
                        break
            except OSError:
                continue
    return found


def wait_until_gone(marker: str, deadline: float = 30.0) -> None:
    """Polls until no process carries ``marker`` (generous deadline for a loaded machine)."""
    end = time.monotonic() + deadline
    while True:
        left = processes_with(marker)
        if not left:
            return
        if time.monotonic() > end:
            raise AssertionError(f"processes with marker {marker} still alive: {left}")
        time.sleep(0.1)


@pytest.fixture
def marker() -> str:
    """A unique word to put in a child's argv or environment."""
    return f"swpytest-{uuid.uuid4().hex}"


@pytest.fixture
def log_dir(tmp_path) -> str:  # type: ignore[no-untyped-def]
    path = tmp_path / "logs"
    path.mkdir(mode=0o700)
    return str(path)
