"""Finding the `quietus` binary that came with this package."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import List, Optional

from ._errors import QuietusNotFound

__all__ = ["find_quietus_bin"]

_EXE = "quietus" + (sysconfig.get_config_var("EXE") or "")


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"


def _scripts_folders() -> List[str]:
    """The folders where an installer puts this package's binary, most likely first."""
    folders: List[Optional[str]] = []
    # The environment this interpreter runs in (a venv, uvx's, the system's).
    folders.append(sysconfig.get_path("scripts"))
    # `pip install --user`: ~/.local/bin.
    try:
        folders.append(sysconfig.get_path("scripts", scheme=_user_scheme()))
    except KeyError:  # a Python built without the user scheme
        pass
    # `pip install --target DIR`: the package is DIR/quietus, the binary DIR/bin.
    package = os.path.dirname(os.path.abspath(__file__))
    folders.append(os.path.join(os.path.dirname(package), "bin"))
    # `pip install --prefix P`: the package is P/lib/pythonX.Y/site-packages/quietus.
    parts = package.split(os.sep)
    if len(parts) > 4 and parts[-2] == "site-packages" and parts[-4] == "lib":
        folders.append(os.path.join(os.sep.join(parts[:-4]), "bin"))
    seen: List[str] = []
    for folder in folders:
        if folder and folder not in seen:
            seen.append(folder)
    return seen


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_quietus_bin() -> str:
    """Returns the path of the `quietus` binary.

    Looked for, in this order: the scripts folder of the environment this package is installed
    in (where the wheel puts it; also the user scheme's, and those of ``pip install --target``
    and ``--prefix``), then the ``QUIETUS`` environment variable (a path), then ``PATH``.

    Raises:
        QuietusNotFound: none of them has it; the message lists every place looked at.
    """
    looked: List[str] = []
    for folder in _scripts_folders():
        path = os.path.join(folder, _EXE)
        looked.append(path)
        if _executable(path):
            return path
    named = os.environ.get("QUIETUS")
    if named:
        looked.append(f"{named} (the QUIETUS environment variable)")
        if _executable(named):
            return named
        found = shutil.which(named) if os.sep not in named else None
        if found:
            return found
    found = shutil.which(_EXE)
    if found:
        return found
    looked.append(f"PATH ({os.environ.get('PATH', '')!r})")
    places = "".join(f"\n  - {place}" for place in looked)
    raise QuietusNotFound(
        "the quietus binary was not found; looked at:"
        f"{places}\n"
        "Install the wheel (`pip install quietus`), which puts the binary in the "
        "environment's scripts folder, or set QUIETUS to the binary's path "
        "(e.g. target/release/quietus of a cargo build)."
    )


def resolve_binary(explicit: Optional[str]) -> str:
    """``explicit`` (a path, or a name looked up on PATH) when given, else
    :func:`find_quietus_bin`; raises :class:`QuietusNotFound` when it cannot be run."""
    if explicit is None:
        return find_quietus_bin()
    path = os.fspath(explicit)
    if _executable(path):
        return path
    found = shutil.which(path) if os.sep not in path else None
    if found:
        return found
    raise QuietusNotFound(f"the quietus binary {path!r} does not exist or is not executable")
