"""Restoring a session cut short by a crash: the interrupted turn is mended."""

from __future__ import annotations

from typing import Any

from acp_server.messages import history_problems
from acp_server.store.database import Event
from acp_server.store.transcript import INTERRUPTED_RESULT, restore


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [],
        "tool_calls": [{"id": i, "name": "run_command", "arguments": {}} for i in ids],
    }


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "content": [{"type": "text", "text": "ok"}], "tool_call_id": call_id}


def log(*bodies: Any) -> list[Event]:
    events = []
    for seq, body in enumerate(bodies, start=1):
        kind, payload = body if isinstance(body, tuple) else ("message", body)
        events.append(Event(seq, kind, payload))
    return events


def test_a_call_cut_off_by_the_crash_gets_an_interrupted_result() -> None:
    restored = restore(log(user("a"), calls("c1", "c2"), result("c1")), lambda key: None)
    assert [m.tool_call_id for m in restored.repairs] == ["c2"]
    assert restored.repairs[0].text == INTERRUPTED_RESULT
    assert history_problems(restored.history) == []


def test_a_call_id_reused_from_an_earlier_turn_is_still_repaired() -> None:
    # Some servers number calls per reply (and the scripted backend per process), so the id
    # of the interrupted call may already have a result from an earlier turn.
    events = log(
        user("a"),
        calls("call_0"),
        result("call_0"),
        ("turn", {"stopReason": "end_turn"}),
        user("b"),
        calls("call_0"),
    )
    restored = restore(events, lambda key: None)
    assert [m.tool_call_id for m in restored.repairs] == ["call_0"]
    assert history_problems(restored.history) == []


def test_an_unanswered_last_prompt_is_marked_and_nothing_is_added() -> None:
    events = log(
        user("a"), calls("c1"), result("c1"), ("turn", {"stopReason": "end_turn"}), user("b")
    )
    restored = restore(events, lambda key: None)
    assert restored.repairs == []
    assert restored.history[-1].text.startswith("[This message was interrupted")


def test_unanswered_calls_match_by_position_not_by_id() -> None:
    from acp_server.messages import Message, TextPart, ToolCall, unanswered_calls

    call = ToolCall("call_0_0", "read_file", {"path": "a"})
    history = [
        Message("user", (TextPart("one"),)),
        Message("assistant", tool_calls=(call,)),
        Message("tool", (TextPart("ok"),), tool_call_id="call_0_0"),
        Message("assistant", (TextPart("done"),)),
        Message("user", (TextPart("two"),)),
        Message("assistant", tool_calls=(call, ToolCall("call_0_1", "grep", {}))),
        Message("tool", (TextPart("ok"),), tool_call_id="call_0_1"),
    ]
    assert unanswered_calls(history) == ["call_0_0"]
    assert unanswered_calls(history[:4]) == []
