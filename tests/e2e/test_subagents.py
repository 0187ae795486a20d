"""Subagents over real pipes: the `task` tool runs a child session (scripted rounds are taken
by parent and child in order); a client that opted in (`clientCapabilities.subagents`) sees
the child as a session of its own, any other sees it inside the parent's tool call; cancels,
replay on load, and the parent's context holding only the child's answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_llm import MockLLM, running_mock_llm
from tests.support.mock_llm.view import conversation
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
ANSWER = "CHILD ANSWER: notes.txt begins with alpha."
SECRET = "alpha-beta-gamma file body"  # what the child read: never in the parent's context
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


TASK = calls(
    (
        "task",
        {
            "description": "Read the notes",
            "prompt": "Read notes.txt, write its first word to out.txt, say how it begins.",
            "tools": ["read_file", "write_file"],
        },
    )
)
CHILD = [
    calls(("read_file", {"path": "notes.txt"})),
    calls(("write_file", {"path": "out.txt", "content": "alpha\n"})),  # asks first
    {"text": ANSWER},
]


async def opened(
    server_factory: Start, script: Any, cwd: Path, rounds: list[Any], opted_in: bool
) -> tuple[RawServer, str]:
    (cwd / "notes.txt").write_text(SECRET + "\n", encoding="utf-8")
    env = {"ACP_SERVER_DATA_DIR": str(cwd / "data")}
    server: RawServer = await server_factory("--script", str(script(rounds)), env=env)
    caps: dict[str, Any] = {"subagents": {}} if opted_in else {}
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return server, str(answer["result"]["sessionId"])


def asked(server: RawServer, answer: Callable[[Any], Any]) -> list[Any]:
    """Permission requests are kept (their params) and answered by `answer`."""
    seen: list[Any] = []

    async def handle(params: Any) -> Any:
        seen.append(params)
        return await answer(params)

    server.handlers["session/request_permission"] = handle
    return seen


async def allow(params: Any) -> Any:
    return ALLOW


def prompt_params(session: str, text: str = "Look at the notes.") -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": text}]}


def updates(frames: list[Frame]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f["params"]["sessionId"], f["params"]["update"])
        for f in frames
        if f.get("method") == "session/update"
    ]


def child_of(shown: list[tuple[str, dict[str, Any]]]) -> str:
    first = next(u for _, u in shown if u["sessionUpdate"] == "subagent_update")
    return str(first["sessionId"])


def task_final(shown: list[tuple[str, dict[str, Any]]], parent: str) -> dict[str, Any]:
    """The last update of the parent's task tool call."""
    task_id = next(u["toolCallId"] for s, u in shown if s == parent and u.get("name") == "task")
    return [u for s, u in shown if s == parent and u.get("toolCallId") == task_id][-1]


def said(shown: list[tuple[str, dict[str, Any]]], session: str) -> str:
    return "".join(
        u["content"]["text"]
        for s, u in shown
        if s == session and u["sessionUpdate"] == "agent_message_chunk"
    )


def texts(update: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in update["content"] if c["type"] == "content")


async def delegated(
    server_factory: Start, script: Any, cwd: Path
) -> tuple[RawServer, str, list[Any], list[tuple[str, dict[str, Any]]]]:
    """An opted-in session whose prompt ran a task to its end: (server, parent, permission
    requests, updates shown)."""
    rounds = [TASK, *CHILD, {"text": "Parent done."}]
    server, parent = await opened(server_factory, script, cwd, rounds, opted_in=True)
    permissions = asked(server, allow)
    req = await server.call("session/prompt", prompt_params(parent))
    answer, before = await server.response(req, 30)
    assert answer["result"]["stopReason"] == "end_turn"
    return server, parent, permissions, updates(before)


async def test_an_opted_in_client_sees_the_child_as_its_own_session(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    _, parent, permissions, shown = await delegated(server_factory, script, tmp_path)
    child = child_of(shown)
    first_child = next(i for i, (s, _) in enumerate(shown) if s == child)
    announce = next(i for i, (_, u) in enumerate(shown) if u.get("sessionId") == child)
    assert announce < first_child  # announced on the parent before any traffic of the child
    states = [
        u["state"] for s, u in shown if s == parent and u["sessionUpdate"] == "subagent_update"
    ]
    assert states == [
        {"state": "running"},
        {"state": "requires_action"},
        {"state": "running"},
        {"state": "idle", "stopReason": "end_turn"},
    ]
    idle = max(i for i, (_, u) in enumerate(shown) if u.get("state", {}).get("state") == "idle")
    assert all(i < idle for i, (s, _) in enumerate(shown) if s == child)
    child_kinds = [u["sessionUpdate"] for s, u in shown if s == child]
    assert child_kinds.count("tool_call") == 2 and "agent_message_chunk" in child_kinds
    assert [p["sessionId"] for p in permissions] == [child]
    final = task_final(shown, parent)
    assert final["status"] == "completed"
    assert {"type": "session", "sessionId": child} in final["content"]
    assert ANSWER in texts(final)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "alpha\n"
    assert said(shown, parent) == "Parent done."


async def test_load_replays_parent_and_child_and_list_shows_only_the_parent(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    server, parent, _, shown = await delegated(server_factory, script, tmp_path)
    child = child_of(shown)
    listed = await server.request("session/list", {})
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [parent]
    data = {"ACP_SERVER_DATA_DIR": str(tmp_path / "data")}
    load = {"sessionId": parent, "cwd": str(tmp_path), "mcpServers": []}
    again = await server_factory("--script", str(script([])), env=data)
    caps: dict[str, Any] = {"subagents": {}}
    await again.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    loaded, replay = await again.response(await again.call("session/load", load), 30)
    assert "result" in loaded
    replayed = updates(replay)
    assert child_of(replayed) == child
    replayed_child = [u["sessionUpdate"] for s, u in replayed if s == child]
    assert replayed_child.count("tool_call") == 2 and "user_message_chunk" in replayed_child
    first = next(i for i, (s, _) in enumerate(replayed) if s == child)
    assert replayed[first - 1][1]["sessionUpdate"] == "subagent_update"
    assert ANSWER in texts(task_final(replayed, parent))
    # A client without the opt-in loads it as it would have been shown: no child, no reference.
    legacy = await server_factory("--script", str(script([])), env=data)
    await legacy.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    loaded, replay = await legacy.response(await legacy.call("session/load", load), 30)
    assert "result" in loaded
    plain = updates(replay)
    assert {s for s, _ in plain} == {parent}
    assert all(u["sessionUpdate"] != "subagent_update" for _, u in plain)
    final = task_final(plain, parent)
    assert ANSWER in texts(final) and all(c["type"] != "session" for c in final["content"])


async def test_without_the_opt_in_the_child_works_inside_the_parents_tool_call(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [TASK, *CHILD, {"text": "Parent done."}]
    server, parent = await opened(server_factory, script, tmp_path, rounds, opted_in=False)
    permissions = asked(server, allow)
    answer, before = await server.response(
        await server.call("session/prompt", prompt_params(parent)), 30
    )
    assert answer["result"]["stopReason"] == "end_turn"
    shown = updates(before)
    assert {s for s, _ in shown} == {parent}
    assert all(u["sessionUpdate"] != "subagent_update" for _, u in shown)
    final = task_final(shown, parent)
    task_id = final["toolCallId"]
    assert [(p["sessionId"], p["toolCall"]["toolCallId"]) for p in permissions] == [
        (parent, task_id)
    ]
    progress = [
        texts(u)
        for s, u in shown
        if u.get("toolCallId") == task_id and u.get("status") == "in_progress" and "content" in u
    ]
    assert any("Read" in p and "notes.txt" in p for p in progress), progress
    assert ANSWER in texts(final) and final["status"] == "completed"
    assert all(c["type"] != "session" for c in final["content"])


@pytest.mark.parametrize("opted_in", [True, False], ids=["opted-in", "no-opt-in"])
async def test_cancelling_the_parent_while_the_child_waits_ends_both(
    server_factory: Start, script: Any, tmp_path: Path, opted_in: bool
) -> None:
    rounds = [TASK, *CHILD[:2], {"text": "After the cancel."}]
    server, parent = await opened(server_factory, script, tmp_path, rounds, opted_in)
    waiting = asyncio.Event()

    async def hold(params: Any) -> Any:
        waiting.set()
        await asyncio.sleep(30)
        return ALLOW

    asked(server, hold)
    req = await server.call("session/prompt", prompt_params(parent))
    await asyncio.wait_for(waiting.wait(), 20)
    await server.notify("session/cancel", {"sessionId": parent})
    answer, before = await server.response(req, 20)
    assert answer["result"]["stopReason"] == "cancelled"
    shown = updates(before)
    if opted_in:
        child = child_of(shown)
        idle = [u["state"] for _, u in shown if u["sessionUpdate"] == "subagent_update"][-1]
        assert idle == {"state": "idle", "stopReason": "cancelled"}
        child_calls = {
            u["toolCallId"]: u.get("status") for s, u in shown if s == child and "toolCallId" in u
        }
        assert set(child_calls.values()) == {"completed", "failed"}  # the write never ran
    assert task_final(shown, parent)["status"] == "failed"
    assert not (tmp_path / "out.txt").exists()
    then = await server.request("session/prompt", prompt_params(parent, "And now?"), timeout=20)
    assert then["result"]["stopReason"] == "end_turn"  # nothing left running in the way


@pytest.mark.parametrize("how", ["session/cancel", "cancelled answer"])
async def test_cancelling_only_the_child_lets_the_parent_go_on(
    server_factory: Start, script: Any, tmp_path: Path, how: str
) -> None:
    rounds = [TASK, *CHILD[:2], {"text": "I will do it myself."}]
    server, parent = await opened(server_factory, script, tmp_path, rounds, opted_in=True)
    children: list[str] = []

    async def cancel_child(params: Any) -> Any:
        children.append(params["sessionId"])
        if how == "cancelled answer":
            return {"outcome": {"outcome": "cancelled"}}
        await server.notify("session/cancel", {"sessionId": params["sessionId"]})
        await asyncio.sleep(30)
        return ALLOW

    asked(server, cancel_child)
    req = await server.call("session/prompt", prompt_params(parent))
    answer, before = await server.response(req, 30)
    assert answer["result"]["stopReason"] == "end_turn"
    shown = updates(before)
    assert children == [child_of(shown)]
    idle = [u["state"] for _, u in shown if u["sessionUpdate"] == "subagent_update"][-1]
    assert idle == {"state": "idle", "stopReason": "cancelled"}
    final = task_final(shown, parent)
    assert final["status"] == "failed" and "cancelled this subagent" in texts(final)
    assert said(shown, parent) == "I will do it myself."
    assert not (tmp_path / "out.txt").exists()


async def test_a_cancelled_answer_without_the_opt_in_cancels_the_parents_turn(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [TASK, *CHILD[:2], {"text": "Next turn."}]
    server, parent = await opened(server_factory, script, tmp_path, rounds, opted_in=False)

    async def cancelled(params: Any) -> Any:
        return {"outcome": {"outcome": "cancelled"}}

    asked(server, cancelled)
    answer = await server.request("session/prompt", prompt_params(parent), timeout=30)
    assert answer["result"]["stopReason"] == "cancelled"  # it was asked as the parent's call
    then = await server.request("session/prompt", prompt_params(parent, "And now?"), timeout=20)
    assert then["result"]["stopReason"] == "end_turn"


async def test_the_parents_context_holds_the_childs_answer_not_its_transcript(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text(SECRET + "\n", encoding="utf-8")
    task = {
        "id": "call_task",
        "name": "task",
        "arguments": {"description": "Read", "prompt": "Read notes.txt."},
    }
    mock_llm.queue(
        {"tool_calls": [task]},
        {
            "tool_calls": [
                {"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}}
            ]
        },
        {"text": ANSWER},
        {"text": "Parent done."},
    )
    env = {"OPENAI_BASE_URL": f"{mock_llm.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server = await server_factory("--model", "openai:mock-model", env=env)
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    made = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    answer = await server.request(
        "session/prompt", prompt_params(made["result"]["sessionId"]), timeout=30
    )
    assert answer["result"]["stopReason"] == "end_turn"
    _, child_first, child_second, parent_second = (
        conversation(r.json) for r in mock_llm.chat_requests
    )
    assert [t.role for t in child_first] == ["system", "user"]  # a fresh context of its own
    assert (
        child_first[0].text.startswith("You are a subagent")
        and child_first[1].text == "Read notes.txt."
    )
    assert "task" not in str(mock_llm.chat_requests[1].json.get("tools"))  # no grandchildren
    assert SECRET in str(child_second[-1].text)
    assert [t.role for t in parent_second] == ["system", "user", "assistant", "tool"]
    assert parent_second[-1].text == ANSWER
    assert SECRET not in str(mock_llm.chat_requests[3].json)


async def test_the_configured_subagent_model_answers_the_child(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    task = {"name": "task", "arguments": {"description": "Look", "prompt": "Say hello."}}
    mock_llm.queue({"tool_calls": [task]}, {"text": "Parent done."})
    async with running_mock_llm() as cheap:
        cheap.queue({"text": ANSWER})
        config = tmp_path / "config.toml"
        config.write_text(
            'subagent_model = "cheap:helper"\n'
            f'[providers.cheap]\ndialect = "openai"\nbase_url = "{cheap.url}/v1"\n',
            encoding="utf-8",
        )
        env = {
            "OPENAI_BASE_URL": f"{mock_llm.url}/v1",
            "OPENAI_API_KEY": "sk-mock",
            "ACP_SERVER_DISCOVER": "0",
        }
        args = ("--model", "openai:mock-model", "--config", str(config))
        server = await server_factory(*args, env=env)
        await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        made = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        session = made["result"]["sessionId"]
        answer = await server.request("session/prompt", prompt_params(session), timeout=30)
        assert answer["result"]["stopReason"] == "end_turn"
        (child,) = cheap.chat_requests
        assert child.json["model"] == "helper"
        assert conversation(child.json)[-1].text == "Say hello."
    assert [r.json["model"] for r in mock_llm.chat_requests] == ["mock-model", "mock-model"]
    assert conversation(mock_llm.chat_requests[-1].json)[-1].text == ANSWER
