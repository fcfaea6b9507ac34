"""The installed package: its binary, version, typing marker and finder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import quietus
import quietus._find as finder

REPO = Path(__file__).resolve().parents[2]


def test_the_package_under_test_is_the_installed_one() -> None:
    package = Path(quietus.__file__).resolve()
    assert REPO / "python" not in package.parents, package
    assert Path(sysconfig.get_path("purelib")).resolve() in package.parents


def test_the_wheel_installed_the_binary_in_the_scripts_folder() -> None:
    binary = quietus.find_quietus_bin()
    assert binary == os.path.join(sysconfig.get_path("scripts"), "quietus")
    assert os.access(binary, os.X_OK)


def test_the_version_is_the_crates() -> None:
    cargo = (REPO / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)  # type: ignore[union-attr]
    assert quietus.__version__ == version
    out = subprocess.run([quietus.find_quietus_bin(), "--version"], capture_output=True, text=True)
    assert version in out.stdout
    module = subprocess.run(
        [sys.executable, "-m", "quietus", "--version"], capture_output=True, text=True
    )
    assert module.returncode == 0 and version in module.stdout


def test_the_package_is_typed() -> None:
    assert (Path(quietus.__file__).parent / "py.typed").is_file()


def test_the_finder_falls_back_to_quietus_then_path_and_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = quietus.find_quietus_bin()
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(finder, "_scripts_folders", lambda: [str(empty)])
    monkeypatch.delenv("QUIETUS", raising=False)
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(quietus.QuietusNotFound) as caught:
        quietus.find_quietus_bin()
    message = str(caught.value)
    assert str(empty / "quietus") in message and "QUIETUS" in message
    assert isinstance(caught.value, FileNotFoundError)
    monkeypatch.setenv("QUIETUS", real)
    assert quietus.find_quietus_bin() == real
    monkeypatch.delenv("QUIETUS")
    monkeypatch.setenv("PATH", os.path.dirname(real))
    assert quietus.find_quietus_bin() == real


def uvx_and_wheel() -> "tuple[str, str]":
    uvx = os.environ.get("QUIETUS_TEST_UVX") or shutil.which("uvx")
    wheel = os.environ.get("QUIETUS_TEST_WHEEL")
    if not uvx or not wheel:
        pytest.skip("set QUIETUS_TEST_UVX and QUIETUS_TEST_WHEEL (.ci/run does)")
    return uvx, wheel


def test_uvx_runs_the_command_and_serve_from_the_wheel_alone(tmp_path: Path) -> None:
    uvx, wheel = uvx_and_wheel()
    env = dict(
        os.environ, UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_TOOL_DIR=str(tmp_path / "uv-tools")
    )
    base = [uvx, "--offline", "--from", wheel, "quietus"]
    run = subprocess.run(
        base + ["-i", "5s", "--", "bash", "-c", "echo hi from uvx; exit 7"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 7, run.stderr
    assert run.stdout == b"hi from uvx\n"
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'
    serve = subprocess.run(
        base + ["serve"], input=request, capture_output=True, env=env, cwd=tmp_path, timeout=120
    )
    assert serve.returncode == 0, serve.stderr
    assert b'"serverInfo"' in serve.stdout and b'"quietus"' in serve.stdout
