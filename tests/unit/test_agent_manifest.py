"""`agent.json`, the entry for the ACP registry (agentclientprotocol/registry), stays valid and
in step with the package it installs.

The registry's format (its `agent.schema.json`): `id` (lowercase letters, digits, hyphens),
`name`, `version` (semantic), `description` and `distribution` are required; `repository` is a
URL; `distribution` holds at least one of `binary`, `npx`, `uvx` and nothing else; a package
distribution has a `package` and may have `args` (strings) and `env` (strings). Its build
(`build_registry.py`) adds: a distribution pinned to the entry's version, never `latest`; an
`icon.svg` beside `agent.json`, 16x16, monochrome (every fill and stroke `currentColor`, `none`
or `inherit`, at least one `currentColor`), without comments. Its auth check runs the agent with
an empty HOME and reads the first line on stdout as the `initialize` answer, which must list a
method of type `agent` or `terminal`. An editor that installs from the registry runs
`uvx PACKAGE ARGS...`, which starts the console script named like the package: so that script
must exist, and the arguments must be ones our CLI takes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema

from acp_server.cli import build_parser
from tests.support.child import read_until
from tests.support.raw import console_script

ROOT = Path(__file__).parents[2]

PACKAGE_DISTRIBUTION = {
    "type": "object",
    "required": ["package"],
    "properties": {
        "package": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "additionalProperties": False,
}
REGISTRY_FORMAT = {
    "type": "object",
    "required": ["id", "name", "version", "description", "distribution"],
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
        "name": {"type": "string", "minLength": 1},
        "version": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+"},
        "description": {"type": "string", "minLength": 1},
        "repository": {"type": "string", "pattern": "^https://"},
        "authors": {"type": "array", "items": {"type": "string"}},
        "license": {"type": "string"},
        "distribution": {
            "type": "object",
            "minProperties": 1,
            "properties": {"npx": PACKAGE_DISTRIBUTION, "uvx": PACKAGE_DISTRIBUTION, "binary": {}},
            "additionalProperties": False,
        },
    },
}


def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / "agent.json").read_text(encoding="utf-8"))
    return loaded


def project() -> dict[str, Any]:
    loaded: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    return dict(loaded["project"])


def test_the_manifest_follows_the_registry_format() -> None:
    errors = [
        e.message for e in jsonschema.Draft7Validator(REGISTRY_FORMAT).iter_errors(manifest())
    ]
    assert errors == []
    assert {"repository", "license"} <= manifest().keys()


def test_the_manifest_names_the_package_it_installs() -> None:
    agent, package = manifest(), project()
    assert agent["id"] == agent["name"] == package["name"]
    assert agent["version"] == package["version"]
    assert agent["license"] == package["license"]
    assert agent["distribution"]["uvx"]["package"] == f"{package['name']}=={package['version']}"


def test_uvx_starts_our_console_script_with_arguments_the_cli_takes() -> None:
    agent, package = manifest(), project()
    # uvx runs the script named like the package: the one editors start.
    assert package["scripts"][package["name"]] == "acp_server.cli:main"
    args = agent["distribution"]["uvx"].get("args", [])
    parsed = build_parser().parse_args(args)  # exits (fails the test) on an unknown argument
    assert parsed.command in (None, "serve", "acp"), "the registry must start the server"


def test_the_distribution_is_pinned_to_the_version_never_latest() -> None:
    agent = manifest()
    pinned = re.fullmatch(
        r"([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.+-]*)", agent["distribution"]["uvx"]["package"]
    )
    assert pinned is not None, "uvx needs PACKAGE==VERSION"
    assert pinned.group(2) == agent["version"] == project()["version"]
    assert "latest" not in json.dumps(agent["distribution"]).lower()


SVG = "{http://www.w3.org/2000/svg}"
MONOCHROME = {"currentcolor", "none", "inherit"}


def paints(element: ET.Element) -> list[str]:
    """Every fill and stroke an element sets, as attributes or in its style."""
    found = [element.get(name) for name in ("fill", "stroke")]
    for declaration in (element.get("style") or "").split(";"):
        name, _, value = declaration.partition(":")
        if name.strip().lower() in ("fill", "stroke"):
            found.append(value)
    return [value.strip().lower() for value in found if value is not None]


def test_the_icon_is_16_by_16_and_monochrome() -> None:
    text = (ROOT / "icon.svg").read_text(encoding="utf-8")
    assert "<!--" not in text  # the registry refuses comments (they break its MDX pages)
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    assert (root.get("width"), root.get("height")) == ("16", "16")
    assert (root.get("viewBox") or "").split() == ["0", "0", "16", "16"]
    used = [value for element in root.iter() for value in paints(element)]
    assert set(used) <= MONOCHROME, used
    assert "currentcolor" in used  # it follows the editor's theme
    assert not [e for e in root.iter() if e.tag in (f"{SVG}style", f"{SVG}image")]


def test_the_first_line_on_stdout_is_the_initialize_answer(tmp_path: Path) -> None:
    """As the registry's auth check runs us: the manifest's arguments, an empty HOME, no keys."""
    home = tmp_path / "home"
    home.mkdir()
    keep = ("PATH", "PYTHONPATH", "TMPDIR", "ACP_SERVER_DATA_DIR", "XDG_STATE_HOME")
    env = {k: v for k, v in os.environ.items() if k in keep}
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {"terminal": True, "_meta": {"terminal-auth": True}},
        },
    }
    args = manifest()["distribution"]["uvx"].get("args", [])
    with subprocess.Popen(
        [console_script(), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**env, "HOME": str(home), "TERM": "dumb"},
        cwd=tmp_path,
        text=True,
    ) as agent:
        assert agent.stdin is not None and agent.stdout is not None
        agent.stdin.write(json.dumps(request) + "\n")
        agent.stdin.flush()
        # Read with a deadline: a server that never answered held this test for ever.
        first = read_until(agent.stdout.fileno(), lambda got: b"\n" in got, 60).split(b"\n")[0]
        agent.stdin.close()
        agent.wait(timeout=30)
    answer = json.loads(first)  # anything else on stdout first fails here
    assert answer["id"] == 1
    types = [m.get("type", "agent") for m in answer["result"]["authMethods"]]
    assert {"agent", "terminal"} & set(types), "the registry needs an agent or terminal method"
