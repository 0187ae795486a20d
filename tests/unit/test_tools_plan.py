"""update_plan emits one complete ACP `plan` update and tells the model what it recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from acp_server import schemas
from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import ToolContext
from acp_server.tools.plan import UPDATE_PLAN
from tests.support.acp_schema import schema_path


def make_ctx(tmp_path: Path) -> tuple[ToolContext, list[dict[str, Any]], list[Permit]]:
    emitted: list[dict[str, Any]] = []
    permits: list[Permit] = []

    async def permit(p: Permit) -> None:
        permits.append(p)

    ctx = ToolContext("call-1", tmp_path, (tmp_path,), NoEditor(), emitted.append, permit)
    return ctx, emitted, permits


ARGS = {
    "entries": [
        {"content": "Read the failing test", "status": "completed", "priority": "high"},
        {"content": "Fix the parser", "status": "in_progress"},
        {"content": "Run the suite", "status": "pending", "priority": "low"},
    ]
}


async def test_emits_the_complete_plan(tmp_path: Path) -> None:
    ctx, emitted, permits = make_ctx(tmp_path)
    outcome = await UPDATE_PLAN.run(ARGS, ctx)
    assert outcome.ok
    assert outcome.text == "Plan updated: 3 entries (1 completed)."
    assert permits == []
    assert emitted == [
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read the failing test", "priority": "high", "status": "completed"},
                {"content": "Fix the parser", "priority": "medium", "status": "in_progress"},
                {"content": "Run the suite", "priority": "low", "status": "pending"},
            ],
        }
    ]


async def test_one_entry_and_an_empty_plan(tmp_path: Path) -> None:
    ctx, emitted, _ = make_ctx(tmp_path)
    one = await UPDATE_PLAN.run({"entries": [{"content": "Do it", "status": "pending"}]}, ctx)
    assert one.text == "Plan updated: 1 entry (0 completed)."
    empty = await UPDATE_PLAN.run({"entries": []}, ctx)
    assert empty.text == "Plan updated: 0 entries (0 completed)."
    assert emitted[-1] == {"sessionUpdate": "plan", "entries": []}


async def test_update_matches_the_official_schema(tmp_path: Path) -> None:
    path = schema_path()
    defs = json.loads(path.read_text(encoding="utf-8"))["$defs"]
    validator = Draft202012Validator({"$ref": "#/$defs/SessionUpdate", "$defs": defs})
    ctx, emitted, _ = make_ctx(tmp_path)
    await UPDATE_PLAN.run(ARGS, ctx)
    await UPDATE_PLAN.run({"entries": []}, ctx)
    for update in emitted:
        assert list(validator.iter_errors(update)) == []


def test_presentation_and_kind(tmp_path: Path) -> None:
    ctx, _, _ = make_ctx(tmp_path)
    presentation = UPDATE_PLAN.present(ARGS, ctx)
    assert presentation.title == "Update plan" and presentation.locations == []
    assert (UPDATE_PLAN.kind, UPDATE_PLAN.effect) == ("think", "think")


def test_schema_accepts_and_rejects() -> None:
    name = "tools/update_plan.json"
    assert schemas.problems(name, ARGS) == []
    assert schemas.problems(name, {"entries": [{"content": "x", "status": "done"}]}) != []
    assert schemas.problems(name, {"entries": [{"content": "x"}]}) != []
    assert schemas.problems(name, {"entries": [{"content": "x", "status": "pending", "n": 1}]})
    assert schemas.problems(name, {}) == ["`entries` is required"]
