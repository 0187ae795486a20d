"""The thought level reaches the wire: OpenAI `reasoning_effort`, Anthropic thinking (a budget,
or adaptive), Ollama `think`; no level leaves every request exactly as before."""

from __future__ import annotations

from typing import Any

import pytest

from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.backends.ollama import wire as _ollama_wire
from acp_server.backends.openai import wire as _openai_wire
from acp_server.messages import Message, ModelRequest, TextPart, ToolCall, ToolSpec, text_message
from tests.support.strict_dialects import anthropic_problems, ollama_problems, openai_problems

READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})
ASK = ModelRequest((text_message("user", "hi"),), tools=(READ,), system="Be brief.")


def with_level(level: str | None) -> ModelRequest:
    return ModelRequest(ASK.messages, ASK.tools, ASK.system, thought_level=level)


def openai_body(level: str | None) -> dict[str, Any]:
    return _openai_wire.payload("gpt-5", with_level(level), stream=True, stream_options=True)


def anthropic_body(
    level: str | None, *, adaptive: bool = False, budget: int | None = None
) -> dict[str, Any]:
    return _anthropic_wire.payload(
        "claude-x", with_level(level), max_tokens=8192, thinking_budget=budget, adaptive=adaptive
    )


def ollama_body(level: str | None, think: bool | str | None = None) -> dict[str, Any]:
    return _ollama_wire.payload("qwen3:8b", with_level(level), num_ctx=8192, think=think)


@pytest.mark.parametrize(
    ("level", "effort"),
    [("minimal", "minimal"), ("low", "low"), ("high", "high"), ("max", "xhigh"), ("off", "none")],
)
def test_openai_sends_the_level_as_reasoning_effort(level: str, effort: str) -> None:
    body = openai_body(level)
    assert body["reasoning_effort"] == effort
    assert openai_problems(body) == []


@pytest.mark.parametrize("level", [None, "on"])
def test_openai_without_a_level_or_with_on_sends_no_reasoning_effort(level: str | None) -> None:
    assert "reasoning_effort" not in openai_body(level)


def test_no_level_leaves_every_request_as_it_was() -> None:
    plain = ModelRequest(ASK.messages, ASK.tools, ASK.system)
    assert openai_body(None) == _openai_wire.payload(
        "gpt-5", plain, stream=True, stream_options=True
    )
    assert anthropic_body(None, budget=2048) == _anthropic_wire.payload(
        "claude-x", plain, max_tokens=8192, thinking_budget=2048
    )
    assert ollama_body(None, think=True) == _ollama_wire.payload(
        "qwen3:8b", plain, num_ctx=8192, think=True
    )


@pytest.mark.parametrize(("level", "budget"), [("minimal", 1024), ("low", 4096), ("max", 32000)])
def test_anthropic_turns_the_level_into_a_thinking_budget(level: str, budget: int) -> None:
    body = anthropic_body(level, budget=2048)  # the level wins over the backend's own budget
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] > budget
    assert anthropic_problems(body) == []


def test_anthropic_adaptive_models_get_adaptive_thinking_with_an_effort() -> None:
    body = anthropic_body("high", adaptive=True)
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "high"}
    assert body["max_tokens"] == 8192
    assert anthropic_problems(body) == []
    assert "output_config" not in anthropic_body("on", adaptive=True)


def test_anthropic_off_sends_no_thinking_even_with_a_budget_configured() -> None:
    body = anthropic_body("off", budget=4096)
    assert "thinking" not in body and "output_config" not in body


def test_anthropic_level_is_dropped_when_pending_calls_lost_their_thinking() -> None:
    call = ToolCall("toolu_1", "read_file", {"path": "a.py"})
    history = (
        text_message("user", "read a.py"),
        Message("assistant", tool_calls=(call,)),  # made by another model: no signed thinking
        Message("tool", (TextPart("print(1)"),), tool_call_id="toolu_1"),
    )
    request = ModelRequest(history, (READ,), thought_level="high")
    body = _anthropic_wire.payload("claude-x", request, max_tokens=8192, thinking_budget=None)
    assert "thinking" not in body
    assert anthropic_problems(body) == []


@pytest.mark.parametrize(
    ("level", "think"),
    [("off", False), ("on", True), ("minimal", "low"), ("medium", "medium"), ("max", "high")],
)
def test_ollama_sends_the_level_as_think(level: str, think: bool | str) -> None:
    body = ollama_body(level, think=True)  # the level wins over the backend's own `think`
    assert body["think"] == think
    assert ollama_problems(body) == []
