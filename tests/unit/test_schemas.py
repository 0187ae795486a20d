"""`schemas.quick_accept` must never accept what jsonschema rejects, and must accept the
ordinary well-formed params (otherwise the fast path is dead weight)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from acp_server import schemas

SCHEMAS = sorted(
    p.relative_to(schemas.schema_dir()).as_posix() for p in schemas.schema_dir().rglob("*.json")
)

GOOD: dict[str, list[Any]] = {
    "acp/initialize.json": [
        {"protocolVersion": 1},
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True}},
            "clientInfo": {"name": "zed", "version": "1"},
        },
    ],
    "acp/session_new.json": [
        {"cwd": "/tmp/x", "mcpServers": []},
        {
            "cwd": "/w",
            "mcpServers": [
                {
                    "name": "fs",
                    "command": "/bin/mcp",
                    "args": [],
                    "env": [{"name": "A", "value": "b"}],
                }
            ],
        },
        {
            "cwd": "/w",
            "mcpServers": [
                {"type": "http", "name": "h", "url": "http://127.0.0.1:1/mcp", "headers": []}
            ],
            "additionalDirectories": ["/a"],
        },
        {"cwd": "/w"},
    ],
    "acp/session_prompt.json": [
        {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]},
        {
            "sessionId": "s",
            "prompt": [
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
            ],
        },
        {
            "sessionId": "s",
            "prompt": [{"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}],
        },
        {
            "sessionId": "s",
            "prompt": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}, "_meta": {}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}},
                {"type": "resource_link", "uri": "u", "name": "n", "size": 3, "title": None},
            ],
        },
    ],
    "acp/session_cancel.json": [{"sessionId": "s"}],
    # Tool arguments as models send them: checked at every tool call, so they must never wait
    # for jsonschema (~50 ms to import on the first call of a process).
    "tools/edit_file.json": [
        {"path": "a.py", "edits": [{"old_text": "x", "new_text": "y"}]},
        {"path": "/w/a.py", "edits": [{"old_text": "x", "new_text": "", "replace_all": True}]},
    ],
    "tools/glob.json": [{"pattern": "**/*.py"}, {"pattern": "*.md", "path": "docs"}],
    "tools/grep.json": [
        {"pattern": "def main"},
        {"pattern": "x", "path": "src", "glob": "*.py", "ignore_case": True, "max_results": 5},
    ],
    "tools/list_directory.json": [{}, {"path": "src"}],
    "tools/read_file.json": [{"path": "a.py"}, {"path": "a.py", "line": 10, "limit": 20}],
    "tools/run_command.json": [
        {"command": "ls"},
        {"command": "make test", "cwd": "sub", "timeout_seconds": 30},
        {"command": "npm run dev", "background": True, "stop_on_cancel": True},
    ],
    "tools/command_output.json": [{}, {"id": "bg_1"}, {"id": "bg_2", "wait_seconds": 5}],
    "tools/stop_command.json": [{"id": "bg_1"}],
    "tools/fetch_url.json": [{"url": "https://docs.python.org/3/"}],
    "tools/update_plan.json": [
        {"entries": [{"content": "read the code", "status": "pending", "priority": "high"}]},
    ],
    "tools/write_file.json": [{"path": "a.txt", "content": ""}],
    "script.schema.json": [
        [
            {
                "text": "a",
                "thought": "b",
                "delay_ms": 1,
                "tool_calls": [{"name": "x", "arguments": {}}],
            }
        ],
        [],
    ],
}

ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.5,
    1.0,
    "",
    "x",
    "/abs",
    [],
    [1],
    {},
    {"type": "text"},
    70000,
]


def mutate(value: Any, rng: random.Random) -> Any:
    """Change one random spot of a JSON value: drop a key, swap a type, add junk."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.3:
            del out[key]
        elif roll < 0.6:
            out[key] = rng.choice(ODD_VALUES)
        else:
            out[key] = mutate(out[key], rng)
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        items = list(value)
        i = rng.randrange(len(items))
        items[i] = mutate(items[i], rng) if rng.random() < 0.6 else rng.choice(ODD_VALUES)
        return items
    return copy.deepcopy(rng.choice(ODD_VALUES))


@pytest.mark.parametrize("name", SCHEMAS)
def test_good_examples_take_the_fast_path(name: str) -> None:
    for example in GOOD.get(name, []):
        assert schemas.quick_accept(schemas.load(name), example), example
        assert schemas.problems(name, example) == []


@pytest.mark.parametrize("name", SCHEMAS)
def test_fast_path_never_accepts_invalid(name: str) -> None:
    schema = schemas.load(name)
    authority = Draft202012Validator(schema)
    rng = random.Random(f"{name}-1234")
    seeds = GOOD.get(name) or [{}]
    rejected = 0
    for _ in range(3000):
        instance = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            instance = mutate(instance, rng)
        if schemas.quick_accept(schema, instance):
            assert authority.is_valid(instance), json.dumps(instance)
        else:
            rejected += 1
    assert rejected > 0


def test_every_schema_file_is_a_valid_schema() -> None:
    for name in SCHEMAS:
        Draft202012Validator.check_schema(schemas.load(name))
    assert any(Path(n).name == "session_new.json" for n in SCHEMAS)


def test_a_resource_without_text_or_blob_is_worded_without_quoting_it() -> None:
    blob = "A" * 5000
    found = schemas.problems(
        "acp/session_prompt.json",
        {"sessionId": "s", "prompt": [{"type": "resource", "resource": {"uri": "u", "b": blob}}]},
    )
    assert found == [
        "`prompt[0].resource` must be a text resource (`uri` and `text`) "
        "or a binary resource (`uri` and base64 `blob`)"
    ]
