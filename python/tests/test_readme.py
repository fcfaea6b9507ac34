"""The examples of python/README.md (the PyPI page) run, each in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list:
    text = README.read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def test_the_readme_has_its_examples() -> None:
    # The harness, check=True, the client, asyncio, errors (at least).
    assert len(python_blocks()) >= 5


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_a_readme_example_runs(index: int, tmp_path: Path) -> None:
    code = python_blocks()[index]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (
        f"example {index}:\n{code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
