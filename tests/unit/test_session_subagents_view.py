"""How a subagent is shown: the `subagent_update`s, the progress lines in the parent's tool
call, the replay for each kind of client, and the child's editor."""

from __future__ import annotations

from typing import Any

from acp_server import updates
from acp_server.editor_api import NoEditor
from acp_server.session.subagents import view

CHILD = "sess_child"
ANNOUNCED = view.announcement(CHILD, "Read the notes", "Read notes.txt.")
STORED = [updates.message_chunk("agent_message_chunk", "found it", "m1")]


def stored(child_id: str) -> list[dict[str, Any]]:
    assert child_id == CHILD
    return STORED


def test_the_announcement_and_the_states() -> None:
    assert ANNOUNCED == {
        "sessionUpdate": "subagent_update",
        "sessionId": CHILD,
        "title": "Read the notes",
        "description": "Read notes.txt.",
        "capabilities": {"cancel": {}},
        "state": {"state": "running"},
    }
    assert view.state(CHILD, "idle", "cancelled")["state"] == {
        "state": "idle",
        "stopReason": "cancelled",
    }
    assert "stopReason" not in view.state(CHILD, "requires_action")["state"]


def test_progress_lines_follow_the_childs_tool_calls() -> None:
    progress = view.Progress("Read the notes")
    assert progress.add(updates.tool_call("c1", "Read notes.txt", name="read_file"))
    assert not progress.add(updates.message_chunk("agent_message_chunk", "hm", "m"))
    progress.add(updates.tool_call("c2", "Write out.txt", name="write_file"))
    progress.waiting("c2")
    progress.add(updates.tool_call_update("c1", status="completed"))
    assert progress.text() == (
        "Subagent: Read the notes\n- Read notes.txt: done\n- Write out.txt: waiting for your"
        " permission"
    )
    shown = progress.update("call_task")
    assert shown["toolCallId"] == "call_task" and shown["status"] == "in_progress"


def test_replay_for_a_client_that_opted_in_brings_the_childs_updates() -> None:
    assert view.replay(ANNOUNCED, "sess_parent", True, stored) == [
        ("sess_parent", ANNOUNCED),
        *[(CHILD, u) for u in STORED],
    ]
    idle = view.state(CHILD, "idle", "end_turn")
    assert view.replay(idle, "sess_parent", True, stored) == [("sess_parent", idle)]
    ref = updates.tool_call_update("t", status="completed", content=[view.reference(CHILD)])
    assert view.replay(ref, "sess_parent", True, stored) is None  # as stored


def test_replay_for_another_client_leaves_the_child_out() -> None:
    assert view.replay(ANNOUNCED, "sess_parent", False, stored) == []
    text = updates.text_content("the answer")
    final = updates.tool_call_update("t", status="completed", content=[view.reference(CHILD), text])
    assert view.replay(final, "sess_parent", False, stored) == [
        ("sess_parent", {**final, "content": [text]})
    ]
    plain = updates.tool_call_update("t", status="completed", content=[text])
    assert view.replay(plain, "sess_parent", False, stored) is None


async def test_the_childs_editor_asks_through_its_own_route() -> None:
    asked: list[dict[str, Any]] = []

    async def ask(tool_call: dict[str, Any], options: list[dict[str, Any]]) -> dict[str, Any]:
        asked.append(tool_call)
        return {"outcome": "cancelled"}

    async def question(request: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        asked.append({"question": request["message"], "toolCallId": call_id})
        return {"action": "decline"}

    editor = view.ChildEditor(NoEditor(), ask, question)
    assert await editor.request_permission({"toolCallId": "c"}, []) == {"outcome": "cancelled"}
    assert await editor.elicit({"message": "Which?"}, "d") == {"action": "decline"}
    assert asked == [{"toolCallId": "c"}, {"question": "Which?", "toolCallId": "d"}]
    assert not editor.can_subagents and not editor.can_read
