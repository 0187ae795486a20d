"""Thought levels: clamping on a model switch, and each dialect's request knob."""

from __future__ import annotations

import pytest

from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.messages import ModelRequest, text_message
from acp_server.thought import (
    LEVELS,
    anthropic_budget,
    anthropic_thinking,
    clamp,
    guess,
    ollama_think,
    openai_reasoning_effort,
)
from tests.support.strict_dialects import anthropic_problems, ollama_problems

GRADED = ("low", "medium", "high")
TOGGLE = ("off", "on")


@pytest.mark.parametrize(
    ("level", "levels", "expected"),
    [
        ("high", GRADED, "high"),
        ("max", GRADED, "high"),
        ("off", GRADED, "low"),
        ("minimal", ("off", "low", "high"), "low"),
        ("high", TOGGLE, "on"),
        ("minimal", TOGGLE, "on"),  # nearer to off, but the user asked for thinking
        ("on", GRADED, "medium"),
        ("medium", (), None),
    ],
)
def test_a_level_is_clamped_to_the_nearest_the_model_has(
    level: str, levels: tuple[str, ...], expected: str | None
) -> None:
    assert clamp(level, levels) == expected


def test_with_no_choice_yet_each_dialect_gets_what_its_api_does_untold() -> None:
    assert clamp(None, ("off", "low", "medium", "high"), "anthropic") == "off"
    assert clamp(None, GRADED, "openai") == "medium"
    assert clamp(None, TOGGLE, "ollama") == "on"


def test_openai_reasoning_effort() -> None:
    assert [openai_reasoning_effort(level) for level in LEVELS] == [
        "none",
        None,
        "minimal",
        "low",
        "medium",
        "high",
        "xhigh",
    ]
    assert openai_reasoning_effort(None) is None


def test_anthropic_thinking_by_budget_or_adaptive() -> None:
    assert anthropic_thinking("off", adaptive=False) == {}
    assert anthropic_thinking("high", adaptive=False) == {
        "thinking": {"type": "enabled", "budget_tokens": 24_000}
    }
    assert anthropic_thinking("on", adaptive=True) == {"thinking": {"type": "adaptive"}}
    assert anthropic_thinking("minimal", adaptive=True) == {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "low"},
    }
    assert anthropic_budget("minimal") == 1024 and anthropic_budget("off") is None


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_makes_a_request_the_strict_checks_accept(level: str) -> None:
    request = ModelRequest((text_message("user", "hi"),))
    body = _anthropic_wire.payload(
        "claude-a", request, max_tokens=4096, thinking_budget=anthropic_budget(level)
    )
    assert anthropic_problems({**body, **anthropic_thinking(level, adaptive=True)}) == []
    assert anthropic_problems(body) == []
    assert ollama_problems({"model": "m", "messages": [], "think": ollama_think(level)}) == []


def test_known_models_get_their_levels_and_unknown_ones_none() -> None:
    assert guess("anthropic", "claude-sonnet-4-5-20250929") == (
        ("off", "low", "medium", "high"),
        False,
    )
    levels, adaptive = guess("anthropic", "claude-opus-4-6")
    assert adaptive and "max" in levels
    assert guess("openai", "openrouter/o3-mini")[0] == GRADED
    assert guess("openai", "gpt-4.1") == ((), False)
    assert guess("ollama", "qwen3:8b") == ((), False)  # Ollama says so itself (/api/show)
