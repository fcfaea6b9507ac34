"""The package against the one definition of the protocol and of the settings.

The enums (``Outcome``, ``StallKind``, ``Stream``, ``State``) are checked against the installed
binary's ``quietus serve --schema`` (the document checked in at docs/serve.schema.json), and
the keyword arguments of ``run()`` and of the clients' ``start()`` against its settings table
(``quietus __settings``, and the schema's ``ProcessStartParams``)."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Set, get_args

import pytest

import quietus
from quietus import _protocol, _run

README = Path(__file__).resolve().parents[1] / "README.md"

#: Settings of the command that ``run()`` does not take, and why.
NOT_IN_RUN = {
    "input_wait_notice": "run() has no event stream to send the notice to",
    # For engines that read a status only (docs/fleet.md); run() gives the outcome itself,
    # and its returncode stays the documented 124.
    "exit_code_stall": "run() returns the outcome; a status per outcome is for engines",
    "exit_code_hard_timeout": "run() returns the outcome; a status per outcome is for engines",
    "exit_code_input_wait": "run() returns the outcome; a status per outcome is for engines",
    # Options of the command that run() leaves to extra_args=["--exclude", "*.tmp"], …
    "exclude": "run() passes it through extra_args",
    "solo_cap": "run() passes it through extra_args",
    "probe": "run() passes it through extra_args",
}

#: A value of each kind of the settings table (``quietus __settings``) for run(), and the
#: words its flag then takes.
RUN_SAMPLES = {
    "switch": (True, None),
    "duration": (2, "2000ms"),
    "duration_or_none": (2, "2000ms"),
    "signal": ("INT", "INT"),
    "containment": ("group", "group"),
    "paths": (["notes"], "notes"),
    "list": (["^DONE$"], "^DONE$"),
}

#: The settings that turn a source off: the package takes them as one ``sources=`` set.
SOURCE_OFF = {
    "no_output": "output",
    "no_watch": "files",
    "no_children": "children",
    "no_network": "network",
}


def _binary_json(*args: str) -> Dict[str, Any]:
    out = subprocess.run(
        [quietus.find_quietus_bin(), *args], capture_output=True, check=True, timeout=60
    )
    value = json.loads(out.stdout)
    assert isinstance(value, dict)
    return value


@pytest.fixture(scope="module")
def schema() -> Dict[str, Any]:
    return _binary_json("serve", "--schema")


@pytest.fixture(scope="module")
def settings() -> List[Dict[str, Any]]:
    table = _binary_json("__settings")
    assert isinstance(table["version"], str)
    rows = table["settings"]
    assert isinstance(rows, list) and rows
    return rows


def _literal_values(alias: Any) -> Set[str]:
    values: Set[str] = set()
    for arg in get_args(alias):
        values |= _literal_values(arg) if get_args(arg) else {arg}
    return values


@pytest.mark.parametrize(
    "name,alias",
    [
        ("Outcome", quietus.Outcome),
        ("StallKind", quietus.StallKind),
        ("Stream", quietus.Stream),
        ("State", quietus.State),
    ],
)
def test_the_literal_types_are_the_schemas_enums(
    schema: Dict[str, Any], name: str, alias: Any
) -> None:
    assert _literal_values(alias) == set(schema["$defs"][name]["enum"]), name


def test_run_outcome_is_an_outcome_or_not_started(schema: Dict[str, Any]) -> None:
    expected = set(schema["$defs"]["Outcome"]["enum"]) | {"not_started"}
    assert _literal_values(quietus.RunOutcome) == expected


def test_the_docs_name_the_kinds_the_server_sends(schema: Dict[str, Any]) -> None:
    kinds = schema["$defs"]["StallKind"]["enum"]
    doc = quietus.Diagnosis.__doc__ or ""
    readme = README.read_text()
    line = re.search(r"`diagnosis` — `kind` \((.*?)\), `summary`", readme, re.S)
    assert line, "the README lists the diagnosis kinds"
    in_readme = re.findall(r"`(\w+)`", line.group(1))
    assert set(in_readme) == set(kinds), in_readme
    for kind in kinds:
        assert f"``{kind}``" in doc, kind
    for wrong in ("input_wait", "busy_without_progress"):
        assert f"``{wrong}``" not in doc and f"`{wrong}`" not in line.group(1)


def _start_settings(schema: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """process/start's settings: the setting's name → its key and property."""
    properties = schema["$defs"]["ProcessStartParams"]["properties"]
    found = {p["x-setting"]: dict(p, key=key) for key, p in properties.items() if "x-setting" in p}
    assert found, "the schema marks the settings of process/start"
    return found


def _sample(prop: Dict[str, Any]) -> Any:
    """A value of the property's type, in the package's units (seconds, or a flag)."""
    kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    if "array" in kinds:
        return ["notes"]
    return True if "boolean" in kinds else 1.5


@pytest.mark.parametrize("client", [quietus.Client, quietus.AsyncClient])
def test_start_takes_every_setting_of_process_start(schema: Dict[str, Any], client: Any) -> None:
    parameters = inspect.signature(client.start).parameters
    for name in _start_settings(schema):
        taken = "sources" if name in SOURCE_OFF else name
        assert taken in parameters, f"{client.__name__}.start lacks {taken} ({name})"


def test_start_params_sends_each_setting_under_its_key(schema: Dict[str, Any]) -> None:
    names = inspect.signature(_protocol.start_params).parameters
    base: Dict[str, Any] = {
        name: (False if p.annotation in ("bool", bool) else None)
        for name, p in names.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    base.update(isolated_env=False, stdin=False, pty=False)
    assert not any(k.startswith("no") for k in _protocol.start_params("p", ["true"], **base))
    for name, prop in _start_settings(schema).items():
        if name in SOURCE_OFF:
            others = quietus.SOURCES - {SOURCE_OFF[name]}
            params = _protocol.start_params("p", ["true"], **dict(base, sources=others))
        else:
            params = _protocol.start_params("p", ["true"], **dict(base, **{name: _sample(prop)}))
        assert prop["key"] in params, (name, params)
        value = params[prop["key"]]
        if isinstance(value, bool):
            assert value is True
        elif isinstance(value, list):
            assert value == ["notes"], (name, value)
        else:
            assert value == 1500, (name, value)
            assert prop["minimum"] <= value <= prop["maximum"], (name, value)


def test_run_takes_every_setting_of_the_command(settings: List[Dict[str, Any]]) -> None:
    parameters = inspect.signature(quietus.run).parameters
    for row in settings:
        if row["flag"] is None or row["name"] in NOT_IN_RUN:
            continue
        taken = "sources" if row["name"] in SOURCE_OFF else row["name"]
        assert taken in parameters, f"run() lacks {taken} ({row['flag']})"
    # Every source a setting turns off is a source of sources=, and nothing else is.
    assert set(SOURCE_OFF.values()) == set(quietus.SOURCES)
    assert set(SOURCE_OFF) <= {row["name"] for row in settings}
    for name in NOT_IN_RUN:
        assert any(row["name"] == name for row in settings), f"{name} is no setting any more"


def test_run_passes_each_setting_as_its_flag(settings: List[Dict[str, Any]]) -> None:
    run_defaults = {
        name: p.default
        for name, p in inspect.signature(quietus.run).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    for row in settings:
        name = row["name"]
        if row["flag"] is None or name in NOT_IN_RUN:
            continue
        if name in SOURCE_OFF:
            options = dict(run_defaults, sources=quietus.SOURCES - {SOURCE_OFF[name]})
        else:
            value, _ = RUN_SAMPLES[row["kind"]]
            options = dict(run_defaults, **{name: value})
        argv = _run._command("quietus", "report.json", ["true"], options)
        assert row["flag"] in argv, (name, argv)
        words = RUN_SAMPLES[row["kind"]][1]
        if words is not None and name not in SOURCE_OFF:
            assert argv[argv.index(row["flag"]) + 1] == words, (name, argv)
