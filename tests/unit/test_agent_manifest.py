"""`agent.json`, the entry for the ACP registry (agentclientprotocol/registry), stays valid and
in step with the package it installs.

The registry's format (its `agent.schema.json`): `id` (lowercase letters, digits, hyphens),
`name`, `version` (semantic), `description` and `distribution` are required; `repository` is a
URL; `distribution` holds at least one of `binary`, `npx`, `uvx` and nothing else; a package
distribution has a `package` and may have `args` (strings) and `env` (strings). An editor that
installs from the registry runs `uvx PACKAGE ARGS...`, which starts the console script named
like the package: so that script must exist, and the arguments must be ones our CLI takes.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema

from acp_server.cli import build_parser

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
