"""Plans over the wire: `plan_update` / `plan_removed` (ACP plan operations, stable 2026-11-20)
for a client that opted in with `clientCapabilities.plan`, the legacy `plan` for the others;
`/clear` removes the plan; `session/load` replays what each client would have been shown."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
ENTRIES = [
    {"content": "Read the failing test", "status": "completed"},
    {"content": "Fix the parser", "status": "in_progress"},
]
MARKDOWN = "# Plan\n\n- [x] Read the failing test\n- [~] Fix the parser\n- [ ] Run the suite\n"


def plan_call(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "update_plan", "arguments": arguments}]}


def plans(frames: list[Frame]) -> list[dict[str, Any]]:
    found = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return [u for u in found if u["sessionUpdate"] in ("plan", "plan_update", "plan_removed")]


async def opened(server: RawServer, cwd: Path, opted_in: bool) -> str:
    caps: dict[str, Any] = {"plan": {}} if opted_in else {}
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return str(answer["result"]["sessionId"])


async def prompt(server: RawServer, session: str, text: str) -> list[Frame]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    answer, before = await server.response(await server.call("session/prompt", params), 30)
    assert answer["result"]["stopReason"] == "end_turn"
    return before


async def load(server: RawServer, session: str, cwd: Path) -> list[Frame]:
    params = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    answer, before = await server.response(await server.call("session/load", params), 30)
    assert "result" in answer
    return before


def expected(opted_in: bool, plan_file: Path) -> list[dict[str, Any]]:
    """What each client is shown: the checklist, the Markdown plan from its file, the removal."""
    entries = [{**e, "priority": "medium"} for e in ENTRIES]
    from_file = [
        {"content": "Read the failing test", "priority": "medium", "status": "completed"},
        {"content": "Fix the parser", "priority": "medium", "status": "in_progress"},
        {"content": "Run the suite", "priority": "medium", "status": "pending"},
    ]
    if not opted_in:
        return [
            {"sessionUpdate": "plan", "entries": entries},
            {"sessionUpdate": "plan", "entries": from_file},
            {"sessionUpdate": "plan", "entries": []},
        ]
    markdown = {"type": "markdown", "planId": "plan", "content": MARKDOWN, "path": str(plan_file)}
    return [
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "plan", "entries": entries},
        },
        {"sessionUpdate": "plan_update", "plan": markdown},
        {"sessionUpdate": "plan_removed", "planId": "plan"},
    ]


@pytest.mark.parametrize("opted_in", [True, False], ids=["plan-operations", "legacy-plan"])
async def test_a_plan_is_shown_in_the_clients_form_removed_by_clear_and_replayed(
    server_factory: Start, script: Any, tmp_path: Path, opted_in: bool
) -> None:
    plan_file = tmp_path / "PLAN.md"
    plan_file.write_text(MARKDOWN, encoding="utf-8")
    rounds = [
        plan_call(entries=ENTRIES),
        {"text": "Planned."},
        plan_call(file="PLAN.md"),
        {"text": "Planned from the file."},
    ]
    env = {"ACP_SERVER_DATA_DIR": str(tmp_path / "data")}
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await opened(server, tmp_path, opted_in)
    shown = plans(await prompt(server, session, "plan it"))
    shown += plans(await prompt(server, session, "plan from the file"))
    shown += plans(await prompt(server, session, "/clear"))
    assert shown == expected(opted_in, plan_file)
    # A new process replays the stored session: the client sees what it was shown live.
    again = await server_factory("--script", str(script([])), env=env)
    await again.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"plan": {}} if opted_in else {}}
    )
    assert plans(await load(again, session, tmp_path)) == shown


async def test_a_session_planned_for_one_client_replays_in_the_form_another_takes(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Stored once, shown as each client takes it: a Markdown plan made for a client with plan
    operations reaches a legacy client as the checklist it holds."""
    env = {"ACP_SERVER_DATA_DIR": str(tmp_path / "data")}
    rounds = [plan_call(markdown=MARKDOWN), {"text": "Planned."}]
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await opened(server, tmp_path, opted_in=True)
    live = plans(await prompt(server, session, "plan it"))
    assert live == [
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "markdown", "planId": "plan", "content": MARKDOWN},
        }
    ]
    legacy = await server_factory("--script", str(script([])), env=env)
    await legacy.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    replayed = plans(await load(legacy, session, tmp_path))
    assert [u["sessionUpdate"] for u in replayed] == ["plan"]
    assert [e["content"] for e in replayed[0]["entries"]] == [
        "Read the failing test",
        "Fix the parser",
        "Run the suite",
    ]
    assert json.dumps(replayed).count("in_progress") == 1
