"""Seeded random histories through every compaction stage: the result is always valid.

Histories as the agent keeps them: prompts (some with images), assistant replies with zero to
three tool calls (files read and edited, plans, commands), results large and small, calls
cancelled by the user, earlier compactions. After each stage: a strict endpoint would accept
the history (no orphaned or unanswered tool messages, no leading result), the latest user
request is there verbatim, the current plan is there, and every file read or edited is named
or counted among the ones the bounded state leaves out.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random

import pytest

from acp_server.agent.turn_text import CANCELLED_RESULT
from acp_server.context.compact import compact
from acp_server.context.fit import ContextBudget
from acp_server.context.prune import prune_tool_outputs
from acp_server.context.state import (
    FILE_TOOLS,
    STATE_KEY,
    KeptState,
    is_state_message,
    rebuild,
    round_starts,
)
from acp_server.context.summary import summary_request
from acp_server.context.tokens import Estimator
from acp_server.context.truncate import truncate
from acp_server.context.window import Window
from acp_server.messages import (
    ImagePart,
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    history_problems,
    text_message,
)

SEEDS = range(40)
WORDS = ("the", "parser", "fails", "on", "empty", "input", "so", "fix", "tokenize", "tests")


def words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def random_call(rng: random.Random, turn: int, n: int) -> ToolCall:
    kind = rng.choice(["read_file", "read_file", "edit_file", "write_file", "update_plan", "grep"])
    path = f"src/m{rng.randint(0, 30)}.py"
    args: dict[str, object] = {"path": path}
    if kind == "update_plan":
        entries = [
            {"content": f"step {k} of turn {turn}", "status": rng.choice(["pending", "completed"])}
            for k in range(rng.randint(1, 4))
        ]
        args = {"entries": entries}
    elif kind == "grep":
        args = {"pattern": "def ", "path": "src"}
    elif kind == "write_file":
        args["content"] = words(rng, 5, 400)
    return ToolCall(f"c{n}", kind, args)


def random_turn(rng: random.Random, turn: int, counter: list[int]) -> list[Message]:
    parts: list[TextPart | ImagePart] = [TextPart(f"turn {turn}: " + words(rng, 1, 60))]
    if rng.random() < 0.15:
        parts.append(ImagePart("aGVsbG8=" * rng.randint(10, 5000), "image/png"))
    out = [Message("user", tuple(parts))]
    for _ in range(rng.randint(0, 4)):
        calls = []
        for _ in range(rng.randint(1, 3)):
            counter[0] += 1
            calls.append(random_call(rng, turn, counter[0]))
        out.append(Message("assistant", (TextPart(words(rng, 0, 20)),), tuple(calls)))
        for call in calls:
            cancelled = rng.random() < 0.1
            text = CANCELLED_RESULT if cancelled else "line\n" * rng.choice([1, 50, 400, 3000])
            out.append(text_message("tool", text, tool_call_id=call.id))
    if rng.random() < 0.8:
        out.append(text_message("assistant", words(rng, 1, 80)))
    return out


def random_history(seed: int) -> list[Message]:
    rng = random.Random(seed)
    counter = [0]
    history: list[Message] = []
    for turn in range(rng.randint(1, 40)):
        history += random_turn(rng, turn, counter)
        if rng.random() < 0.05 and len(history) > 4:  # an earlier compaction
            starts = [s for s in round_starts(history) if s > 0]
            history = rebuild(history, rng.choice(starts), words(rng, 5, 40), 4000)
    if history[-1].role == "assistant" and not history[-1].tool_calls:
        history.append(text_message("user", "the latest request: " + words(rng, 1, 30)))
    return history


# ----- what must hold -------------------------------------------------------------------------


def sent_text(history: list[Message]) -> str:
    calls = [json.dumps(c.arguments) for m in history for c in m.tool_calls]
    return "\n".join([*(m.text for m in history), *calls])


def latest_request(history: list[Message]) -> str:
    for message in reversed(history):
        if message.role == "user" and not is_state_message(message):
            return "".join(p.text for p in message.content if isinstance(p, TextPart))
    return ""


def current_plan(history: list[Message]) -> list[str]:
    plan: list[str] = []
    for message in history:
        for call in message.tool_calls:
            if call.name == "update_plan":
                plan = [e["content"] for e in call.arguments["entries"]]
    return plan


def files(history: list[Message]) -> set[str]:
    """Every file read or edited: in the tool calls, and in earlier compactions' state."""
    named = {c.arguments["path"] for m in history for c in m.tool_calls if c.name in FILE_TOOLS}
    for message in history:
        if is_state_message(message):
            state = KeptState.from_json(message.extra[STATE_KEY])
            named.update(state.files_read + state.files_edited)
    return named


def assert_valid(before: list[Message], after: list[Message], seed: int) -> None:
    assert history_problems(after) == [], f"seed {seed}"
    assert after and after[0].role != "tool", f"seed {seed}"
    text = sent_text(after)
    assert latest_request(before) in text, f"seed {seed}: the latest request is lost"
    assert all(entry in text for entry in current_plan(before)), f"seed {seed}: the plan is lost"
    missing = [path for path in files(before) if path not in text]
    left_out = sum(
        KeptState.from_json(m.extra[STATE_KEY]).files_left_out for m in after if is_state_message(m)
    )
    assert len(missing) <= left_out, f"seed {seed}: a file is neither named nor counted"


# ----- the stages (each test runs every seed; a failure names its seed) ---------------------------


@functools.cache
def _generated() -> tuple[tuple[int, tuple[Message, ...]], ...]:
    return tuple((seed, tuple(random_history(seed))) for seed in SEEDS)


def histories() -> list[tuple[int, list[Message]]]:
    """The seeded histories (generated once; each test gets its own lists)."""
    return [(seed, list(history)) for seed, history in _generated()]


def test_the_generated_histories_are_valid() -> None:
    for seed, history in histories():
        assert history_problems(history) == [], f"seed {seed}"


def test_prune() -> None:
    for seed, history in histories():
        snapshot = list(history)
        keep = random.Random(seed).randint(0, 5000)
        pruned = prune_tool_outputs(history, Estimator(), keep_tokens=keep)
        assert history == snapshot, f"seed {seed}"
        assert [m.role for m in pruned] == [m.role for m in history], f"seed {seed}"
        assert_valid(history, pruned, seed)


def test_rebuild_at_every_kind_of_split() -> None:
    for seed, history in histories():
        rng = random.Random(seed)
        splits = {0, len(history), *rng.sample(range(len(history) + 1), min(5, len(history)))}
        for split in splits:
            summary = words(rng, 0, 50) or None
            assert_valid(history, rebuild(history, split, summary, 2000), seed)


def test_truncate() -> None:
    est = Estimator()
    for seed, history in histories():
        for max_tokens in (200, 1500, 6000, 50_000):
            out = truncate(history, max_tokens, est, user_chars=1000)
            assert_valid(history, out, seed)
            if est.messages(out) > max_tokens:  # only when the state and clipped results overflow
                results = [m for m in out if m.role == "tool"]
                assert all("cut here" in m.text or est.message(m)[0] < 150 for m in results)


def test_summary_requests_have_no_tool_shapes() -> None:
    for seed, history in histories():
        request = summary_request(history, Estimator(), budget=3000, reply_tokens=500)
        only = request.messages[0]
        assert request.tools == () and len(request.messages) == 1, f"seed {seed}"
        assert only.role == "user" and not only.tool_calls, f"seed {seed}"
        assert all(isinstance(p, TextPart) for p in only.content), f"seed {seed}"
        assert Estimator().messages(request.messages) <= 3000, f"seed {seed}"


@pytest.mark.parametrize("window", [4096, 8192, 32768])
@pytest.mark.parametrize("reply", ["ok", None, "long " * 3000])
def test_compact(window: int, reply: str | None) -> None:
    async def summarize(request: ModelRequest) -> str | None:
        assert request.tools == ()
        return reply

    for seed, history in histories():
        snapshot = list(history)
        budget = ContextBudget(Window(configured=window))
        result = asyncio.run(compact(budget, "system", (), history, summarize))
        assert history == snapshot, f"seed {seed}"
        fit = budget.fit("system", (), history)
        if fit.status == "too_large":
            assert result.history == history, f"seed {seed}"
            continue
        assert_valid(history, result.history, seed)
        assert budget.fit("system", (), result.history).used <= fit.budget, f"seed {seed}"
        assert result.after <= result.before, f"seed {seed}: the compaction grew the request"
