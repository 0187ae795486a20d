"""carry_over, rule by rule: each test is one trap a model switch falls into."""

from __future__ import annotations

import base64
import json
from typing import Any

from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.backends.openai import wire as _openai_wire
from acp_server.context.state import STATE_KEY
from acp_server.messages import (
    ImagePart,
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolSpec,
    history_problems,
    text_message,
)
from acp_server.models.carryover import Target, carry_over, differs, tool_name
from tests.support.strict_dialects import anthropic_problems, openai_problems

PNG = base64.b64encode(b"png bytes").decode()
OPENAI = Target("openai", "gpt-4.1")
CLAUDE_A = Target("anthropic", "claude-a")
CLAUDE_B = Target("anthropic", "claude-b")
OLLAMA = Target("ollama", "qwen3:8b")


def user(text: str, *images: ImagePart) -> Message:
    return Message("user", (TextPart(text), *images))


def asked(text: str, *calls: ToolCall, **kw: Any) -> Message:
    return Message("assistant", (TextPart(text),) if text else (), tuple(calls), **kw)


def result(call_id: str, text: str, *images: ImagePart) -> Message:
    return Message("tool", (TextPart(text), *images), tool_call_id=call_id)


def call(call_id: str, name: str = "read_file") -> ToolCall:
    return ToolCall(call_id, name, {"path": "a.py"})


def signed(model: str, signature: str, *calls: ToolCall) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "hm", "signature": signature}]
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name} for c in calls]
    return {"anthropic": {"model": model, "content": blocks}}


def anthropic_body(history: list[Message], model: str) -> dict[str, Any]:
    request = ModelRequest(
        (*history, user("next")), (ToolSpec("read_file", "reads", {"type": "object"}),)
    )
    return _anthropic_wire.payload(model, request, max_tokens=4096, thinking_budget=2048)


def texts(history: list[Message]) -> list[str]:
    return [m.text for m in history]


def test_system_messages_are_dropped_the_new_model_brings_its_own() -> None:
    history = [text_message("system", "old prompt"), user("hi"), asked("hello")]
    assert texts(carry_over(history, OPENAI)) == ["hi", "hello"]


def test_unanswered_calls_orphaned_and_repeated_results_are_dropped() -> None:
    history = [
        user("go"),
        asked("reading", call("c1"), call("c2")),
        result("c1", "one"),
        result("c1", "one again"),
        result("nobody", "stray"),
        asked("done"),
    ]
    out = carry_over(history, OPENAI)
    assert [c.id for c in out[1].tool_calls] == ["c1"]
    assert texts(out) == ["go", "reading", "one", "done"]
    assert history_problems(out) == []


def test_a_result_after_another_message_answers_nothing() -> None:
    history = [user("go"), asked("", call("c1")), user("wait"), result("c1", "late"), asked("ok")]
    out = carry_over(history, OPENAI)
    assert texts(out) == ["go", "wait", "ok"]  # the call lost its result; an empty reply goes


def test_ids_repeating_across_turns_become_unique_and_results_follow_their_own_call() -> None:
    history = [
        user("one"),
        asked("", call("call_0")),
        result("call_0", "first"),
        asked("ok"),
        user("two"),
        asked("", call("call_0")),
        result("call_0", "second"),
        asked("ok"),
    ]
    out = carry_over(history, CLAUDE_A)
    first, second = out[1].tool_calls[0].id, out[5].tool_calls[0].id
    assert first != second
    assert (out[2].tool_call_id, out[2].text) == (first, "first")
    assert (out[6].tool_call_id, out[6].text) == (second, "second")
    assert anthropic_problems(anthropic_body(out, "claude-a")) == []


def test_a_trailing_unanswered_prompt_is_dropped_but_the_compaction_state_stays() -> None:
    cancelled = [user("hi"), asked("hello"), user("do it")]
    assert texts(carry_over(cancelled, OPENAI)) == ["hi", "hello"]
    state = {"user_messages": ["hi"], "plan": None, "files_read": [], "files_edited": []}
    compacted = [text_message("user", "[summary]", extra={STATE_KEY: state})]
    out = carry_over(compacted, OPENAI)
    assert [m.extra for m in out] == [{STATE_KEY: state}]


def test_a_reply_that_was_only_thinking_is_dropped_and_its_prompt_with_it() -> None:
    history = [user("hi"), asked("hello"), user("hard one"), Message("assistant", thought="hmm")]
    assert texts(carry_over(history, OPENAI)) == ["hi", "hello"]


def test_signatures_stay_only_with_the_claude_model_that_signed_them() -> None:
    c = call("toolu_01abc")
    reply = asked("", c, extra=signed("claude-a", "sig-a", c))
    history = [user("go"), reply, result("toolu_01abc", "x"), asked("done")]
    same = carry_over(history, CLAUDE_A)
    assert same[1].extra == reply.extra
    other = carry_over(history, CLAUDE_B)
    assert other[1].extra == {}
    body = anthropic_body(other, "claude-b")
    assert "sig-a" not in json.dumps(body)
    assert anthropic_problems(body, {"sig-a": "claude-a"}) == []


def test_the_signed_blocks_go_when_the_calls_they_describe_were_changed() -> None:
    kept, lost = call("toolu_01abc"), call("toolu_01def")
    reply = asked("", kept, lost, extra=signed("claude-a", "sig-a", kept, lost))
    history = [user("go"), reply, result("toolu_01abc", "x"), asked("done")]
    out = carry_over(history, CLAUDE_A)
    assert [c.id for c in out[1].tool_calls] == ["toolu_01abc"]
    assert out[1].extra == {}


def test_foreign_reasoning_is_dropped_never_turned_into_text() -> None:
    c = call("toolu_01abc")
    reply = asked("", c, thought="secret plan", extra=signed("claude-a", "sig-a", c))
    history = [user("go"), reply, result("toolu_01abc", "x"), asked("done")]
    out = carry_over(history, OPENAI)
    assert out[1].extra == {}
    body = _openai_wire.payload(
        "gpt-4.1", ModelRequest(tuple(out)), stream=True, stream_options=False
    )
    assert "secret plan" not in json.dumps(body) and "sig-a" not in json.dumps(body)
    assert openai_problems(body) == []


def test_a_text_only_model_gets_a_note_for_images_in_prompts_and_in_tool_results() -> None:
    image = ImagePart(PNG, "image/png")
    history = [
        user("look", image),
        asked("", call("c1")),
        result("c1", "screenshot", image),
        asked("seen"),
    ]
    out = carry_over(history, Target("ollama", "gemma3", images=False))
    parts = [p for m in out for p in m.content]
    assert not any(isinstance(p, ImagePart) for p in parts)
    notes = [p.text for p in parts if isinstance(p, TextPart) and "image" in p.text]
    assert len(notes) == 2 and all("cannot see images" in n for n in notes)


def test_images_stay_for_a_model_that_reads_them() -> None:
    image = ImagePart(PNG, "image/png")
    history = [user("look", image), asked("", call("c1")), result("c1", "shot", image), asked("ok")]
    claude = carry_over(history, CLAUDE_A)
    assert isinstance(claude[0].content[1], ImagePart)
    assert isinstance(claude[2].content[1], ImagePart)
    openai = carry_over(history, OPENAI)
    assert isinstance(openai[0].content[1], ImagePart)
    # OpenAI's tool messages are text only: the wire sends the image after them (_openai_wire).
    assert isinstance(openai[2].content[1], ImagePart)


def test_an_image_in_a_format_no_api_reads_becomes_a_note() -> None:
    out = carry_over([user("look", ImagePart("PHN2Zz4=", "image/svg+xml")), asked("ok")], CLAUDE_A)
    assert "image/svg+xml" in out[0].text


def test_ids_are_rewritten_consistently_to_fit_anthropic() -> None:
    history = [
        user("go"),
        asked("", call("functions.read_file:0")),
        result("functions.read_file:0", "x"),
    ]
    out = carry_over([*history, asked("done")], CLAUDE_A)
    new = out[1].tool_calls[0].id
    assert new != "functions.read_file:0" and out[2].tool_call_id == new
    assert anthropic_problems(anthropic_body(out, "claude-a")) == []


def test_mistral_style_targets_get_nine_letters_and_digits_for_call_and_result() -> None:
    history = [user("go"), asked("", call("call_abc"), call("xyz123ABC")), result("call_abc", "a")]
    history += [result("xyz123ABC", "b"), asked("done")]
    out = carry_over(history, Target("openai", "mistral-large", id_style="mistral"))
    ids = [c.id for c in out[1].tool_calls]
    assert ids[1] == "xyz123ABC" and len(ids[0]) == 9 and ids[0].isalnum()
    assert [out[2].tool_call_id, out[3].tool_call_id] == ids


def test_calls_without_an_id_get_one() -> None:
    history = [user("go"), asked("", call("")), result("", "x"), asked("done")]
    out = carry_over(history, OPENAI)
    assert out[1].tool_calls[0].id and out[2].tool_call_id == out[1].tool_calls[0].id


def test_tool_names_are_made_to_fit_the_apis_pattern() -> None:
    assert tool_name("read_file") == "read_file"
    assert tool_name("mcp.github/search") == "mcp_github_search"
    assert tool_name("x" * 80) == "x" * 64
    assert tool_name("") == "tool"


def test_the_input_history_is_never_changed() -> None:
    c = call("functions.read_file:0", "mcp.fs/read")
    reply = asked("", c, extra=signed("claude-a", "sig-a", c))
    history = [text_message("system", "s"), user("go"), reply, result(c.id, "x"), user("cut")]
    before = repr([(m, m.extra) for m in history])
    out = carry_over(history, Target("openai", "m", images=False, id_style="mistral"))
    assert repr([(m, m.extra) for m in history]) == before
    assert all(m.extra is not h.extra for m in out for h in history)


def test_replies_before_the_first_prompt_go_anthropic_wants_the_user_first() -> None:
    history = [result("c0", "stray"), asked("an answer to a lost question"), user("hi")]
    out = carry_over([*history, asked("hello")], CLAUDE_A)
    assert texts(out) == ["hi", "hello"]
    assert anthropic_problems(anthropic_body(out, "claude-a")) == []


def reasoned(model: str, *calls: ToolCall) -> dict[str, Any]:
    """A Responses reply's kept items: two reasoning items, then its calls."""
    items: list[dict[str, Any]] = [
        {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"enc-{n}"}
        for n in (1, 2)
    ]
    items += [{"type": "function_call", "call_id": c.id} for c in calls]
    return {"openai-responses": {"model": model, "items": items}}


def test_reasoning_items_stay_only_with_the_responses_model_that_made_them() -> None:
    c = call("call_1")
    reply = asked("", c, extra=reasoned("gpt-5", c))
    history = [user("go"), reply, result("call_1", "x"), asked("done")]
    assert carry_over(history, Target("openai-responses", "gpt-5"))[1].extra == reply.extra
    for target in (
        Target("openai-responses", "gpt-5-mini"),
        Target("openai", "gpt-5"),
        CLAUDE_A,
        OLLAMA,
    ):
        out = carry_over(history, target)
        assert out[1].extra == {}, target
        assert [m.text for m in out] == ["go", "", "x", "done"]
    body = anthropic_body(carry_over(history, CLAUDE_A), "claude-a")
    assert "enc-1" not in json.dumps(body) and anthropic_problems(body) == []


def test_a_gemini_signature_stays_only_with_its_model_and_unchanged_call() -> None:
    google = {"google": {"thought_signature": "gsig"}}
    c = ToolCall(
        "call_1", "read_file", {}, extra={"openai": {"model": "g3", "extra_content": google}}
    )
    history = [user("go"), asked("", c), result("call_1", "x"), asked("done")]
    assert carry_over(history, Target("openai", "g3"))[1].tool_calls[0].extra == c.extra
    for target in (Target("openai", "gpt-4.1"), CLAUDE_A, Target("openai-responses", "g3")):
        assert carry_over(history, target)[1].tool_calls[0].extra == {}, target
    renamed = carry_over(history, Target("openai", "g3", id_style="mistral"))
    assert renamed[1].tool_calls[0].extra == {}


def test_a_switch_that_only_dropped_private_data_counts_as_a_change() -> None:
    """Messages compare equal without their private data: `differs` must still see it go, or
    the session keeps (and stores) reasoning the switch meant to drop."""
    c = call("call_1")
    history = [user("go"), asked("", c, extra=reasoned("gpt-5", c)), result("call_1", "x")]
    history.append(asked("done"))
    carried = carry_over(history, CLAUDE_A)
    assert carried == history and differs(history, carried)
    assert not differs(history, carry_over(history, Target("openai-responses", "gpt-5")))
