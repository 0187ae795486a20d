"""update_plan emits one complete plan (a checklist, or Markdown inline or from a project file)
and tells the model what it recorded; `updates.plan_view` shows each client the form it takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from acp_server import schemas, updates
from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import ToolContext, ToolFailure
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
    await UPDATE_PLAN.run({"markdown": "- [ ] x"}, ctx)
    views = [
        updates.plan_view(u, on) for u in [*emitted, updates.plan_removed()] for on in (True, False)
    ]
    for update in emitted + views:
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
    assert schemas.problems(name, {"markdown": "- [ ] x"}) == []
    assert schemas.problems(name, {"file": "PLAN.md"}) == []
    assert schemas.problems(name, {"markdown": ""}) != []


@pytest.mark.parametrize("args", [{}, {"entries": [], "markdown": "- [ ] x"}])
async def test_the_plan_comes_one_way_only(tmp_path: Path, args: dict[str, Any]) -> None:
    ctx, emitted, _ = make_ctx(tmp_path)
    with pytest.raises(ToolFailure, match="one way"):
        await UPDATE_PLAN.run(args, ctx)
    assert emitted == []


async def test_a_markdown_plan_and_a_plan_file(tmp_path: Path) -> None:
    ctx, emitted, _ = make_ctx(tmp_path)
    text = "- [x] one\n- [ ] two\n"
    outcome = await UPDATE_PLAN.run({"markdown": text}, ctx)
    assert outcome.text == "Plan updated from Markdown (2 checklist items)."
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "PLAN.md").write_text(text, encoding="utf-8")
    await UPDATE_PLAN.run({"file": "docs/PLAN.md"}, ctx)
    assert emitted == [
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "markdown", "planId": "plan", "content": text},
        },
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "markdown",
                "planId": "plan",
                "content": text,
                "path": str(tmp_path / "docs" / "PLAN.md"),
            },
        },
    ]


async def test_a_plan_file_outside_the_project_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "PLAN.md").write_text("- [ ] secret\n", encoding="utf-8")
    (project / "link.md").symlink_to(tmp_path / "PLAN.md")
    ctx, emitted, _ = make_ctx(project)
    for name in ("../PLAN.md", "link.md"):
        with pytest.raises(ToolFailure, match="outside the project"):
            await UPDATE_PLAN.run({"file": name}, ctx)
    assert emitted == []


def test_each_client_is_shown_the_form_it_takes() -> None:
    entries = [{"content": "x", "priority": "medium", "status": "pending"}]
    legacy = {"sessionUpdate": "plan", "entries": entries}
    items = {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "plan", "entries": entries},
    }
    assert updates.plan_view(legacy, True) == items
    assert updates.plan_view(items, False) == legacy
    assert updates.plan_view(legacy, False) == legacy and updates.plan_view(items, True) == items
    assert updates.plan_view(updates.plan_removed(), False) == {
        "sessionUpdate": "plan",
        "entries": [],
    }
    assert updates.plan_view(updates.plan_removed(), True) == updates.plan_removed()
    other = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    assert updates.plan_view(other, False) is other and updates.plan_view(other, True) is other


def test_markdown_as_legacy_entries() -> None:
    text = "# Plan\n1. [x] done\n- [~] doing\n* [ ] later\nprose\n"
    assert [(e["content"], e["status"]) for e in updates.markdown_entries(text)] == [
        ("done", "completed"),
        ("doing", "in_progress"),
        ("later", "pending"),
    ]
    assert updates.markdown_entries("Just do it.") == [
        {"content": "Just do it.", "priority": "medium", "status": "pending"}
    ]
    assert updates.markdown_entries("  ") == []
