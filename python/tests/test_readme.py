"""The examples of python/README.md (the PyPI page) run, each in a fresh interpreter; the main
README's ``quietus.run`` example prints what that README says it prints; and the Python examples
of both READMEs type-check as user code (``mypy --strict`` against the installed package)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MAIN_README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks(readme: Path = README) -> list:
    text = readme.read_text()
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


def stated_output() -> tuple:
    """The main README's ``quietus.run`` example and the output it states (the ``text`` block
    after the words "prints")."""
    text = MAIN_README.read_text()
    found = re.search(
        r"^```python\n(import quietus\n.*?)^```\n\nprints[^\n]*\n\n```text\n(.*?)^```",
        text,
        re.M | re.S,
    )
    assert found, "the main README's Python section shows a run() example and what it prints"
    return found.group(1), found.group(2)


def test_the_main_readme_run_example_prints_what_it_says(tmp_path: Path) -> None:
    code, stated = stated_output()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    pids = re.compile(r"pid \d+")
    assert pids.sub("pid N", done.stdout) == pids.sub("pid N", stated), done.stdout


def test_the_readme_examples_type_check_as_user_code(tmp_path: Path) -> None:
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.fail(
            "mypy is needed to type-check the READMEs' examples: pip install mypy into the "
            "environment that runs this suite (.ci/run does)"
        )
    files = []
    for name, readme in (("python_readme", README), ("readme", MAIN_README)):
        for index, code in enumerate(python_blocks(readme)):
            path = tmp_path / f"{name}_{index}.py"
            path.write_text(code)
            files.append(str(path))
    assert len(files) >= 7, files
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
