"""The Responses dialect's kept items, rendered: each reasoning item in its place, only while
they still describe the message, and never without the item that followed it."""

from __future__ import annotations

from typing import Any

from acp_server.backends.responses.wire import kept_items, render_message
from acp_server.messages import Message, TextPart, ToolCall

A = ToolCall("call_a", "read_file", {"path": "a"})
B = ToolCall("call_b", "read_file", {"path": "b"})


def rs(n: int, **more: Any) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "encrypted_content": f"enc-{n}", **more}


def reply(items: list[dict[str, Any]], text: str = "", *calls: ToolCall) -> Message:
    content = (TextPart(text),) if text else ()
    extra = {"openai-responses": {"model": "gpt-5", "items": items}}
    return Message("assistant", content, calls or (A,), extra=extra)


def kinds(items: list[dict[str, Any]]) -> list[str]:
    return [str(i.get("id") or i.get("call_id") or i["type"]) for i in items]


def test_interleaved_reasoning_stays_before_the_item_it_preceded() -> None:
    items = [rs(1), {"type": "function_call", "call_id": "call_a"}, rs(2)]
    items.append({"type": "function_call", "call_id": "call_b"})
    out = render_message(reply(items, "", A, B), "gpt-5")
    assert kinds(out) == ["rs_1", "call_a", "rs_2", "call_b"]
    assert out[1]["arguments"] == '{"path": "a"}'  # the call as the history has it


def test_a_summary_left_out_is_sent_empty_and_status_never() -> None:
    (first, _) = render_message(reply([rs(1, status="completed"), {"type": "function_call",
                                "call_id": "call_a"}]), "gpt-5")  # fmt: skip
    assert first == {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-1", "summary": []}


def test_reasoning_before_an_empty_message_goes_with_the_next_item() -> None:
    items = [rs(1), {"type": "message"}, {"type": "function_call", "call_id": "call_a"}]
    assert kinds(render_message(reply(items), "gpt-5")) == ["rs_1", "call_a"]
    with_text = render_message(reply(items, "Reading."), "gpt-5")
    assert kinds(with_text) == ["rs_1", "message", "call_a"]


def test_items_that_no_longer_describe_the_message_are_not_used() -> None:
    items = [rs(1), {"type": "function_call", "call_id": "call_a"}]
    assert kept_items(reply(items), "gpt-5-mini") is None  # another model
    assert kept_items(reply(items, "", B), "gpt-5") is None  # other calls
    plain = render_message(reply(items, "", B), "gpt-5")
    assert kinds(plain) == ["call_b"]
