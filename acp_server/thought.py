"""Thought levels: how hard a model reasons before it answers, one scale for every vendor.

The session offers the levels its model supports (the ACP `thought_level` option) and each
backend turns the chosen level into its own request knob, with the pure functions below:

| level   | OpenAI `reasoning_effort` | Anthropic: budget | Anthropic: adaptive   | Ollama `think` |
|---------|---------------------------|-------------------|-----------------------|----------------|
| off     | "none"                    | no thinking       | no thinking           | false          |
| on      | not sent (the default)    | 10,000 tokens     | the model decides     | true           |
| minimal | "minimal"                 | 1,024 (the least) | effort "low"          | "low"          |
| low     | "low"                     | 4,096             | effort "low"          | "low"          |
| medium  | "medium"                  | 10,000            | effort "medium"       | "medium"       |
| high    | "high"                    | 24,000            | effort "high"         | "high"         |
| max     | "xhigh"                   | 32,000            | effort "max"          | "high"         |

"on" is for models that can only switch thinking on or off (most Ollama thinking models).
Adaptive thinking (`{"type": "adaptive"}` with `output_config.effort`) is what Claude 4.6 and
later want; older Claude models take a token budget.

When the model changes, the chosen level is clamped to the nearest level the new model has.
"""

from __future__ import annotations

from typing import Any

LEVELS = ("off", "on", "minimal", "low", "medium", "high", "max")
NAMES = {
    "off": "Off",
    "on": "On",
    "minimal": "Minimal",
    "low": "Low",
    "medium": "Medium",
    "high": "High",
    "max": "Maximum",
}
DESCRIPTIONS = {
    "off": "Answer without thinking first.",
    "on": "Think first, as much as the model decides.",
    "minimal": "Think as little as possible.",
    "low": "Think briefly: faster and cheaper.",
    "medium": "Think a moderate amount.",
    "high": "Think thoroughly: slower and costlier.",
    "max": "Think as much as the model can.",
}
_RANK = {"off": 0, "minimal": 1, "low": 2, "on": 3, "medium": 3, "high": 4, "max": 5}
# What each API does when it is not told, so the default costs nothing unexpected.
_API_DEFAULT = {
    "anthropic": "off",
    "openai": "medium",
    "openai-responses": "medium",
    "ollama": "on",
}
ANTHROPIC_BUDGETS = {
    "on": 10_000,
    "minimal": 1_024,
    "low": 4_096,
    "medium": 10_000,
    "high": 24_000,
    "max": 32_000,
}
# (model name prefix, levels, adaptive thinking): a first guess for models nobody configured;
# the configuration file says better. First match wins.
_KNOWN: dict[str, tuple[tuple[str, tuple[str, ...], bool], ...]] = {
    "anthropic": (
        ("claude-opus-4-6", ("off", "on", "low", "medium", "high", "max"), True),
        ("claude-opus-4-7", ("off", "on", "low", "medium", "high", "max"), True),
        ("claude-sonnet-4-6", ("off", "on", "low", "medium", "high"), True),
        ("claude-3-7-sonnet", ("off", "low", "medium", "high"), False),
        ("claude-sonnet-4", ("off", "low", "medium", "high"), False),
        ("claude-opus-4", ("off", "low", "medium", "high"), False),
        ("claude-haiku-4", ("off", "low", "medium", "high"), False),
    ),
    "openai": (
        ("gpt-5", ("minimal", "low", "medium", "high"), False),
        ("o1", ("low", "medium", "high"), False),
        ("o3", ("low", "medium", "high"), False),
        ("o4", ("low", "medium", "high"), False),
    ),
    "ollama": (("gpt-oss", ("low", "medium", "high"), False),),
}
_KNOWN["openai-responses"] = _KNOWN["openai"]  # the same models, on the Responses API


def guess(dialect: str, model: str) -> tuple[tuple[str, ...], bool]:
    """The levels a model is known to support, and whether it wants adaptive thinking; ((),
    False) for a model this table does not know (it is offered no thought level)."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, levels, adaptive in _KNOWN.get(dialect, ()):
        if name.startswith(prefix):
            return levels, adaptive
    return (), False


def clamp(level: str | None, levels: tuple[str, ...], dialect: str = "") -> str | None:
    """`level` if the model has it, else the nearest one it has that thinks (or does not) as
    `level` does; the API's default for None; None when the model offers no levels."""
    if not levels:
        return None
    if level is None:
        level = _API_DEFAULT.get(dialect, "medium")
    if level in levels:
        return level
    rank = _RANK.get(level, _RANK["medium"])
    # Thinking stays on (or off) if the model allows it; then the nearest, the lower on a tie.
    return min(
        levels,
        key=lambda have: (
            (have == "off") != (level == "off"),
            abs(_RANK[have] - rank),
            _RANK[have],
        ),
    )


def openai_reasoning_effort(level: str | None) -> str | None:
    """The `reasoning_effort` to send (None: send none, the model's default)."""
    if level is None or level == "on":
        return None
    return {"off": "none", "max": "xhigh"}.get(level, level)


def anthropic_budget(level: str | None) -> int | None:
    """The extended-thinking budget in tokens for models that take one (None: no thinking)."""
    return ANTHROPIC_BUDGETS.get(level) if level else None


def anthropic_thinking(level: str | None, adaptive: bool) -> dict[str, Any]:
    """The request fields that set the level ({}: none, thinking stays off)."""
    if level is None or level == "off":
        return {}
    if not adaptive:
        return {"thinking": {"type": "enabled", "budget_tokens": ANTHROPIC_BUDGETS[level]}}
    fields: dict[str, Any] = {"thinking": {"type": "adaptive"}}
    if level != "on":
        effort = {"minimal": "low"}.get(level, level)
        fields["output_config"] = {"effort": effort}
    return fields


def ollama_think(level: str | None) -> bool | str | None:
    """Ollama's `think`: a switch for most models, a level for those that have levels
    (gpt-oss); None: not sent."""
    if level is None:
        return None
    if level in ("off", "on"):
        return level == "on"
    return {"minimal": "low", "max": "high"}.get(level, level)
