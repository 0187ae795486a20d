"""Seeded random histories carried over to every kind of target: each vendor's strict check
accepts the rendered request.

The histories mix what every backend records: OpenAI-style ids, Anthropic replies with signed
thinking blocks (from two Claude models), Ollama calls without ids, ids that repeat across turns
or do not fit Anthropic's pattern (`functions.read_file:0`), MCP tool names with dots and
slashes, images in prompts and in tool results (some in formats no API reads), cancelled calls,
orphaned and repeated results, system messages, replies that were only thinking, a compacted
start, and a cancelled prompt at the end, OpenAI Responses replies with reasoning items (from
two models) and Gemini calls with thought signatures. Each is carried over to OpenAI-compatible
targets (with and without images, with Mistral-style ids, Gemini 3), the Responses API (two
models), two Anthropic models and Ollama, rendered with the real wire modules, and checked by
tests/support/strict_dialects.py, strict_responses.py and strict_gemini.py.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.backends.ollama import wire as _ollama_wire
from acp_server.backends.openai import wire as _openai_wire
from acp_server.backends.responses import wire as _responses_wire
from acp_server.context.state import ACK, STATE_KEY
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
from acp_server.models.carryover import Target, carry_over
from tests.support.strict_dialects import (
    TOOL_NAME,
    anthropic_problems,
    ollama_problems,
    openai_problems,
)
from tests.support.strict_gemini import gemini_problems
from tests.support.strict_responses import responses_problems

SEEDS = range(60)
FIRST_WORD = "zanzibar"  # in the first prompt: it must reach every model
THOUGHT = "THOUGHT"  # in every thought: it must never reach a model as text
CLAUDES = ("claude-a", "claude-b")
REASONERS = ("gpt-5", "gpt-5-mini")  # Responses models that made reasoning items
GEMINI = "gemini-3-pro-preview"
TARGETS = (
    Target("openai", "gpt-4.1"),
    Target("openai", "text-only", images=False),
    Target("openai", "mistral-large", id_style="mistral"),
    Target("anthropic", "claude-a"),
    Target("anthropic", "claude-b", images=False),
    Target("ollama", "qwen3:8b"),
    Target("ollama", "gemma3", images=False),
    Target("openai-responses", "gpt-5"),
    Target("openai-responses", "gpt-5-mini", images=False),
    Target("openai", GEMINI),
)
TOOL_NAMES = ("read_file", "edit_file", "mcp.github/search_issues", "run-shell", "t" * 70)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


@dataclass
class Maker:
    """Builds one random history; remembers which model made each signature."""

    rng: random.Random
    signatures: dict[str, str] = field(default_factory=dict)
    reasoning: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> model, content
    history: list[Message] = field(default_factory=list)
    serial: int = 0

    def next(self) -> int:
        self.serial += 1
        return self.serial

    def words(self, n: int = 4) -> str:
        return " ".join(self.rng.choice(("fix", "the", "parser", "now", "tests")) for _ in range(n))

    def image(self) -> ImagePart:
        return ImagePart(PNG, self.rng.choice(("image/png", "image/jpeg", "image/svg+xml")))

    def call_id(self, style: str, turn: int, k: int) -> str:
        return {
            "openai": f"call_{self.rng.getrandbits(48):012x}",
            "anthropic": f"toolu_01{self.rng.getrandbits(60):015x}",
            "ollama": self.rng.choice(("", f"call_ollama_{k}")),
            "kimi": f"functions.read_file:{k}",
            "mistral": f"{self.rng.getrandbits(40):09x}"[:9],
            "recovered": f"call_recovered_{k}",
            "responses": f"call_{self.rng.getrandbits(48):012x}",
            "gemini": f"function-call-{self.rng.getrandbits(40):010x}",
        }[style]

    def prompt(self, first: bool = False) -> None:
        parts: list[TextPart | ImagePart] = [TextPart(self.words())]
        if first:
            parts.insert(0, TextPart(f"{FIRST_WORD} "))
        if self.rng.random() < 0.3:
            parts.append(self.image())
        self.history.append(Message("user", tuple(parts)))

    def reply(self, turn: int, final: bool) -> None:
        """One assistant message from a random vendor, with its results (or faults)."""
        styles = ("openai", "anthropic", "ollama", "kimi", "mistral", "recovered", "responses")
        style = self.rng.choice((*styles, "gemini"))
        n_calls = 0 if final else self.rng.randint(1, 3)
        calls = [
            ToolCall(self.call_id(style, turn, k), self.rng.choice(TOOL_NAMES), {"path": f"f{k}"})
            for k in range(n_calls)
        ]
        text = self.words() if final or self.rng.random() < 0.5 else ""
        thought = f"{THOUGHT} {self.words()}" if self.rng.random() < 0.6 else ""
        extra = self.signed(text, thought, calls) if style == "anthropic" and calls else {}
        if style == "responses" and calls:
            extra = self.reasoned(text, calls)
        if style == "gemini" and calls:
            calls[0] = replace(calls[0], extra=self.gemini_signed())
        content = (TextPart(text),) if text else ()
        self.history.append(Message("assistant", content, tuple(calls), None, thought, None, extra))
        self.results(calls)

    def signed(self, text: str, thought: str, calls: list[ToolCall]) -> dict[str, Any]:
        """Anthropic's kept blocks for a reply: signed thinking, text, tool_use."""
        model = self.rng.choice(CLAUDES)
        signature = f"sig-{self.next()}"
        self.signatures[signature] = model
        blocks: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": thought or THOUGHT, "signature": signature}
        ]
        if text:
            blocks.append({"type": "text", "text": text})
        blocks += [{"type": "tool_use", "id": c.id, "name": c.name} for c in calls]
        return {"anthropic": {"model": model, "content": blocks}}

    def reasoned(self, text: str, calls: list[ToolCall]) -> dict[str, Any]:
        """A Responses reply's kept items: one or two reasoning items, the text, the calls."""
        model = self.rng.choice(REASONERS)
        items: list[dict[str, Any]] = []
        for _ in range(self.rng.randint(1, 2)):
            item_id, content = f"rs_{self.next()}", f"enc-{self.serial}"
            self.reasoning[item_id] = {"model": model, "encrypted_content": content}
            summary = [{"type": "summary_text", "text": f"{THOUGHT} {self.words()}"}]
            items.append(
                {
                    "type": "reasoning",
                    "id": item_id,
                    "summary": summary,
                    "encrypted_content": content,
                }
            )
        if text:
            items.append({"type": "message"})
        items += [{"type": "function_call", "call_id": c.id} for c in calls]
        return {"openai-responses": {"model": model, "items": items}}

    def gemini_signed(self) -> dict[str, Any]:
        signature = f"gsig-{self.next()}"
        self.signatures[signature] = GEMINI
        google = {"google": {"thought_signature": signature}}
        return {"openai": {"model": GEMINI, "extra_content": google}}

    def results(self, calls: list[ToolCall]) -> None:
        for call in calls:
            fault = self.rng.random()
            if fault < 0.1:
                continue  # cancelled: never answered
            parts: list[TextPart | ImagePart] = [TextPart(f"result of {call.name}")]
            if self.rng.random() < 0.25:
                parts.append(self.image())
            self.history.append(Message("tool", tuple(parts), tool_call_id=call.id))
            if fault > 0.93:  # a repeated result
                self.history.append(text_message("tool", "again", tool_call_id=call.id))
            elif fault > 0.88:  # an orphan
                self.history.append(text_message("tool", "stray", tool_call_id="call_nobody"))


def random_history(seed: int) -> Maker:
    rng = random.Random(seed)
    maker = Maker(rng)
    if rng.random() < 0.3:  # a compacted start
        state = {"user_messages": ["old ask"], "plan": None, "files_read": [], "files_edited": []}
        maker.history.append(text_message("user", "[summary]", extra={STATE_KEY: state}))
        maker.history.append(text_message("assistant", ACK))
    maker.prompt(first=True)
    maker.reply(0, final=True)  # the first prompt is answered
    for turn in range(1, rng.randint(2, 6)):
        if rng.random() < 0.15:
            maker.history.append(text_message("system", "You are another model."))
        maker.prompt()
        for _ in range(rng.randint(0, 3)):
            maker.reply(turn, final=False)
        if rng.random() < 0.15:  # a reply that was only thinking
            maker.history.append(Message("assistant", thought=f"{THOUGHT} hmm"))
        else:
            maker.reply(turn, final=True)
    if rng.random() < 0.4:  # a prompt cancelled before any answer
        maker.prompt()
    return maker


def render(target: Target, history: list[Message], thinking: bool) -> dict[str, Any]:
    names = sorted({c.name for m in history for c in m.tool_calls} | {"read_file"})
    request = ModelRequest(
        messages=(*history, text_message("user", "and now?")),
        tools=tuple(ToolSpec(name, "a tool", {"type": "object"}) for name in names),
        system="You are a coding agent.",
    )
    if target.dialect == "openai":
        return _openai_wire.payload(target.model, request, stream=True, stream_options=True)
    if target.dialect == "openai-responses":
        return _responses_wire.payload(target.model, request, reasoning=True)
    if target.dialect == "anthropic":
        budget = 2048 if thinking else None
        return _anthropic_wire.payload(
            target.model, request, max_tokens=4096, thinking_budget=budget
        )
    return _ollama_wire.payload(target.model, request, num_ctx=8192, think=True)


def strict_problems(target: Target, body: dict[str, Any], maker: Maker) -> list[str]:
    signatures, reasoning = maker.signatures, maker.reasoning
    if target.dialect == "openai":
        return openai_problems(body) + gemini_problems(body, signatures)
    if target.dialect == "openai-responses":
        return responses_problems(body, reasoning)
    if target.dialect == "anthropic":
        return anthropic_problems(body, signatures)
    return ollama_problems(body)


def without_thinking_blocks(body: dict[str, Any]) -> str:
    """The body as text, minus thinking blocks and reasoning items (where thoughts may go)."""
    if "input" in body:
        return json.dumps([i for i in body["input"] if i.get("type") != "reasoning"])
    messages = [
        [b for b in m["content"] if b.get("type") != "thinking"]
        if isinstance(m.get("content"), list)
        else m
        for m in body["messages"]
    ]
    return json.dumps({**body, "messages": messages})


def snapshot(history: list[Message]) -> str:
    return repr([(m, m.extra) for m in history])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.dialect}-{t.model}")
def test_every_strict_api_accepts_the_carried_over_history(seed: int, target: Target) -> None:
    maker = random_history(seed)
    before = snapshot(maker.history)
    out = carry_over(maker.history, target)
    body = render(target, out, thinking=seed % 2 == 0)
    assert strict_problems(target, body, maker) == []
    assert history_problems(out) == []
    assert snapshot(maker.history) == before, "carry_over changed its input"
    assert FIRST_WORD in json.dumps(body)
    assert THOUGHT not in without_thinking_blocks(body), "reasoning turned into text"
    text = json.dumps(body)
    if target.dialect != "openai-responses":
        assert "encrypted_content" not in text, "reasoning items reached another dialect"
    if target.model != GEMINI:
        assert "thought_signature" not in text, "a Gemini signature reached another model"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.dialect}-{t.model}")
def test_carried_over_history_fits_the_target_and_is_stable(seed: int, target: Target) -> None:
    maker = random_history(seed)
    out = carry_over(maker.history, target)
    calls = [c for m in out for c in m.tool_calls]
    ids = [c.id for c in calls]
    assert len(ids) == len(set(ids)), "call ids repeat"
    if target.id_style == "mistral":
        assert all(len(i) == 9 and i.isalnum() for i in ids), ids
    assert all(TOOL_NAME.fullmatch(c.name) for c in calls)
    assert not any(m.role == "system" for m in out)
    if not target.images:
        assert not any(isinstance(p, ImagePart) for m in out for p in m.content)
    again = carry_over(out, target)
    assert snapshot(again) == snapshot(out), "a second carry-over changed the history again"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_compaction_state_survives_every_switch(seed: int) -> None:
    maker = random_history(seed)
    states = [m.extra[STATE_KEY] for m in maker.history if STATE_KEY in m.extra]
    for target in TARGETS:
        out = carry_over(maker.history, target)
        assert [m.extra[STATE_KEY] for m in out if STATE_KEY in m.extra] == states
