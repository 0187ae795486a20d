"""Compaction as the loop will run it: stages in order, progress guards, failures, no loops.

A `Server` stands in for the model server: it counts tokens more strictly than our estimate
(characters / 3.2), may enforce a window the way llama.cpp does (an error body with `n_ctx`),
and answers summary requests through a scripted `summarize`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from acp_server.context.compact import (
    GOAL_SHARE,
    MAX_SUMMARY_FAILURES,
    Compaction,
    compact,
    shrank,
)
from acp_server.context.fit import ContextBudget
from acp_server.context.prune import prune_tool_outputs
from acp_server.context.state import is_state_message
from acp_server.context.truncate import clip_result
from acp_server.context.window import Window
from acp_server.messages import (
    ContextOverflow,
    Message,
    ModelRequest,
    ToolCall,
    ToolSpec,
    history_problems,
    text_message,
)

SYSTEM = "You are a coding agent. " * 20
TOOLS = (
    ToolSpec("read_file", "Read a text file.", {"type": "object", "properties": {}}),
    ToolSpec("update_plan", "Show the plan.", {"type": "object", "properties": {}}),
)


def read_turn(n: int, chars: int = 6000) -> list[Message]:
    call = ToolCall(f"r{n}", "read_file", {"path": f"src/f{n}.py"})
    return [
        text_message("user", f"request {n}: look at f{n}"),
        Message("assistant", tool_calls=(call,)),
        text_message("tool", "x = 1\n" * (chars // 6), tool_call_id=f"r{n}"),
        text_message("assistant", f"answer {n}"),
    ]


def session(turns: int) -> list[Message]:
    return [m for n in range(turns) for m in read_turn(n)]


@dataclass
class Summaries:
    """A scripted summary endpoint: each call takes the next reply (str, None or exception)."""

    replies: list[object] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)

    async def __call__(self, request: ModelRequest) -> str | None:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else "The user is reading files one by one."
        if isinstance(reply, BaseException):
            raise reply
        return reply if reply is None else str(reply)


async def run(
    budget: ContextBudget,
    hist: list[Message],
    summaries: Summaries | None,
    *,
    manual: bool = False,
    focus: str = "",
) -> Compaction:
    return await compact(budget, SYSTEM, TOOLS, hist, summaries, manual=manual, focus=focus)


def test_shrank_needs_a_clear_margin() -> None:
    assert shrank(1000, 890)
    assert not shrank(1000, 950)
    assert not shrank(1000, 1200)


async def test_prune_alone_when_it_frees_enough() -> None:
    budget = ContextBudget(Window(configured=32768))
    hist = session(16)
    summaries = Summaries()
    result = await run(budget, hist, summaries)
    assert result.stage == "prune"
    assert summaries.requests == []
    assert result.after <= budget.window.budget * 0.85
    assert history_problems(result.history) == []


async def test_summary_when_pruning_is_not_enough() -> None:
    budget = ContextBudget(Window(configured=8192))
    hist = [*session(30), text_message("user", "the latest request")]
    summaries = Summaries(["Goal: read every file."])
    result = await run(budget, hist, summaries)
    assert result.stage == "summary", result.problems
    assert result.summary == "Goal: read every file."
    (request,) = summaries.requests
    assert request.tools == () and all(m.role == "user" for m in request.messages)
    assert is_state_message(result.history[0])
    assert "Goal: read every file." in result.history[0].text
    assert result.history[-1] is hist[-1]
    assert history_problems(result.history) == []
    assert budget.fit(SYSTEM, TOOLS, result.history).status == "fits"


def beyond_the_goal(hist: list[Message], system: str) -> int:
    """Tokens by which the most pruning can do misses the goal (negative: under it)."""
    budget = ContextBudget(Window(configured=8192))
    fit = budget.fit(system, TOOLS, prune_tool_outputs(hist, budget.estimator, 0))
    room = fit.budget - fit.system - fit.tools
    return fit.used - (fit.system + fit.tools + int(room * GOAL_SHARE))


def at_the_goal(hist: list[Message]) -> int:
    """How many characters of system prompt put pruning's result right at the goal."""
    low, high = 0, 40_000
    assert beyond_the_goal(hist, SYSTEM) < 0 < beyond_the_goal(hist, SYSTEM + "p" * high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (
            (middle, high) if beyond_the_goal(hist, SYSTEM + "p" * middle) < 0 else (low, middle)
        )
    return high


async def stage_with(hist: list[Message], pad: int, budget: ContextBudget | None = None) -> str:
    budget = budget or ContextBudget(Window(configured=8192))
    result = await compact(budget, SYSTEM + "p" * pad, TOOLS, hist, Summaries())
    return result.stage


async def test_a_few_tokens_either_side_of_the_goal_do_not_flip_the_stage() -> None:
    """A longer working directory in the system prompt must not turn a prune into a summary."""
    hist = [m for n in range(8) for m in read_turn(n, 3000)]
    edge = at_the_goal(hist)
    stages = {await stage_with(hist, edge + chars) for chars in range(-140, 141, 35)}
    assert stages == {"prune"}


async def test_a_close_call_goes_the_way_the_last_compaction_went() -> None:
    hist = [m for n in range(8) for m in read_turn(n, 3000)]
    edge = at_the_goal(hist)
    budget = ContextBudget(Window(configured=8192))
    assert (
        await run(budget, [*session(30), text_message("user", "go on")], Summaries())
    ).stage == "summary"
    assert await stage_with(hist, edge, budget) == "summary"  # it needed more last time
    assert await stage_with(hist, edge - 3500, budget) == "prune"  # clearly enough
    assert await stage_with(hist, edge, budget) == "prune"  # and now a close call prunes


@pytest.mark.parametrize(
    "reply",
    [None, "", "   ", RuntimeError("HTTP 500"), "a very long summary " * 5000],
    ids=["none", "empty", "blank", "error", "longer-than-replaced"],
)
async def test_a_failed_summary_falls_back_to_truncation(reply: object) -> None:
    budget = ContextBudget(Window(configured=8192))
    hist = [*session(30), text_message("user", "the latest request")]
    result = await run(budget, hist, Summaries([reply]))
    assert result.stage == "truncate"
    assert result.problems
    assert budget.summary_failures == 1
    assert "Earlier messages were removed" in result.history[0].text
    assert "the latest request" in [m.text for m in result.history]
    assert history_problems(result.history) == []
    assert budget.fit(SYSTEM, TOOLS, result.history).status == "fits"


async def test_repeated_summary_failures_go_straight_to_truncation() -> None:
    budget = ContextBudget(Window(configured=8192))
    summaries = Summaries([None] * MAX_SUMMARY_FAILURES)
    hist = session(30)
    for _ in range(MAX_SUMMARY_FAILURES):
        assert (await run(budget, hist, summaries)).stage == "truncate"
    assert len(summaries.requests) == MAX_SUMMARY_FAILURES
    assert (await run(budget, hist, summaries)).stage == "truncate"
    assert len(summaries.requests) == MAX_SUMMARY_FAILURES  # not asked again
    budget.summary_failures = 0
    assert (await run(budget, hist, summaries)).stage == "summary"


async def test_a_good_summary_resets_the_failure_count() -> None:
    budget = ContextBudget(Window(configured=8192))
    await run(budget, session(30), Summaries([None]))
    assert budget.summary_failures == 1
    await run(budget, session(30), Summaries(["fine"]))
    assert budget.summary_failures == 0


async def test_cancelling_the_summary_propagates_and_changes_nothing() -> None:
    budget = ContextBudget(Window(configured=8192))
    hist = session(30)
    before = list(hist)
    with pytest.raises(asyncio.CancelledError):
        await run(budget, hist, Summaries([asyncio.CancelledError()]))
    assert hist == before


async def test_without_a_summarizer_it_truncates() -> None:
    budget = ContextBudget(Window(configured=8192))
    result = await run(budget, session(30), None)
    assert result.stage == "truncate"


async def test_manual_compaction_summarizes_with_the_focus() -> None:
    budget = ContextBudget(Window(configured=32768))
    summaries = Summaries()
    result = await run(budget, session(16), summaries, manual=True, focus="the failing test")
    assert result.stage == "summary"
    assert "focus on: the failing test" in summaries.requests[0].messages[0].text


async def test_manual_compaction_of_a_short_conversation_does_nothing() -> None:
    budget = ContextBudget(Window(configured=32768))
    hist = session(1)
    result = await run(budget, hist, Summaries(), manual=True)
    assert result.stage == "none"
    assert result.history == hist


async def test_fixed_parts_too_large_leave_the_history_untouched() -> None:
    budget = ContextBudget(Window(configured=4096))
    hist = [*session(3), text_message("user", "paste " * 5000)]
    summaries = Summaries()
    result = await run(budget, hist, summaries)
    assert result.stage == "none" and result.history == hist
    assert summaries.requests == []


async def test_a_single_long_turn_keeps_its_request() -> None:
    """One prompt, many tool rounds: the request is far behind the tail and must survive."""
    budget = ContextBudget(Window(configured=8192))
    hist = [text_message("user", "Refactor every module; keep the public API.")]
    for n in range(40):
        hist += read_turn(n)[1:3]
    for summaries in (Summaries(["progress"]), Summaries([None])):
        result = await run(budget, hist, summaries)
        text = "\n".join(m.text for m in result.history)
        assert "Refactor every module; keep the public API." in text
        assert history_problems(result.history) == []
        assert all(f"src/f{n}.py" in text for n in range(40))


# ----- the loop, as the integration will run it -------------------------------------------------


class StrictServer:
    """Counts the way a real tokenizer disagrees with us (chars / 3.2, framing included).
    `n_ctx`: over-window requests get llama.cpp's error body; `report_cap`: the prompt tokens
    it reports are capped there (it silently dropped the rest); neither: it only reports."""

    def __init__(self, n_ctx: int | None = None, report_cap: int | None = None) -> None:
        self.n_ctx = n_ctx
        self.report_cap = report_cap
        self.sent: list[int] = []
        self.rejected = 0

    @staticmethod
    def tokens(system: str, tools: tuple[ToolSpec, ...], history: list[Message]) -> int:
        chars = len(system) + sum(len(json.dumps(t.parameters)) + len(t.description) for t in tools)
        for m in history:
            chars += 20 + len(m.text)
            chars += sum(len(json.dumps(c.arguments)) + 30 for c in m.tool_calls)
        return int(chars / 3.2)

    def send(
        self, system: str, tools: tuple[ToolSpec, ...], history: list[Message]
    ) -> ContextOverflow | int:
        """The overflow (as a backend reports llama.cpp's error body), or the prompt tokens
        reported (0: none)."""
        n = self.tokens(system, tools, history)
        self.sent.append(n)
        if self.n_ctx is not None and n > self.n_ctx:
            self.rejected += 1
            return ContextOverflow(window=self.n_ctx, prompt_tokens=n)
        return 0 if self.report_cap is None else min(n, self.report_cap)


def sent_text(hist: list[Message]) -> str:
    """Everything the model reads: texts and tool-call arguments."""
    calls = [json.dumps(c.arguments) for m in hist for c in m.tool_calls]
    return "\n".join([*(m.text for m in hist), *calls])


@dataclass
class Loop:
    """The integration in miniature: fit before every request, compact, retry once after an
    overflow, run the guard after every round, clip a result larger than the room."""

    budget: ContextBudget
    server: StrictServer
    tools: tuple[ToolSpec, ...] = TOOLS
    warnings: int = 0
    warned_at: int = 0  # requests sent when the first warning came
    compactions: int = 0

    async def request(self, hist: list[Message]) -> list[Message]:
        for attempt in range(2):
            fit = self.budget.fit(SYSTEM, self.tools, hist)
            assert fit.status != "too_large", fit.problem()
            if fit.status == "compact":
                hist = (await compact(self.budget, SYSTEM, self.tools, hist, Summaries())).history
                self.compactions += 1
                assert history_problems(hist) == []
                fit = self.budget.fit(SYSTEM, self.tools, hist)
                assert fit.status == "fits"
            answer = self.server.send(SYSTEM, self.tools, hist)
            if isinstance(answer, int):
                if answer and self.budget.after_round(fit, answer) is not None:
                    self.warnings += 1
                    self.warned_at = self.warned_at or len(self.server.sent)
                return hist
            assert attempt == 0, "a second overflow for the same request"
            self.budget.after_overflow(answer, fit)
        raise AssertionError("unreachable")

    async def turn(self, hist: list[Message], n: int, chars: int) -> list[Message]:
        user, call, output, answer = read_turn(n, chars)
        hist = await self.request([*hist, user])
        room = self.budget.fit(SYSTEM, self.tools, [*hist, call]).room
        clipped = clip_result(output.text, room, self.budget.estimator, "read_file")
        hist = await self.request(
            [*hist, call, text_message("tool", clipped, tool_call_id=f"r{n}")]
        )
        assert hist[-1].tool_call_id == f"r{n}"  # the model still sees what it just read
        text = sent_text(hist)
        assert f"request {n}: look at f{n}" in text  # the latest request, verbatim
        assert all(f"src/f{k}.py" in text for k in range(n + 1))  # every file read
        return [*hist, answer]


async def test_sixty_tool_heavy_turns_against_an_enforced_8k_window() -> None:
    loop = Loop(ContextBudget(Window(configured=32768)), StrictServer(n_ctx=8192))
    hist: list[Message] = []
    for n in range(60):
        hist = await loop.turn(hist, n, 6000)
    assert loop.server.rejected == 1  # the first overflow teaches the window; none after
    assert loop.budget.window.size == 8192
    assert loop.compactions < 40  # compaction frees real room; it does not run every round


async def test_a_window_only_reported_is_never_exceeded() -> None:
    loop = Loop(ContextBudget(Window(configured=32768, discovered=8192)), StrictServer())
    hist: list[Message] = []
    for n in range(60):
        hist = await loop.turn(hist, n, 6000)
    assert max(loop.server.sent) <= 8192


async def test_a_4k_window_with_a_40kb_read() -> None:
    loop = Loop(ContextBudget(Window(discovered=4096)), StrictServer(n_ctx=4096))
    hist: list[Message] = []
    for n in range(30):
        hist = await loop.turn(hist, n, 2000)
    hist = await loop.turn(hist, 30, 40_000)
    assert "cut here" in hist[-2].text
    assert loop.server.rejected == 0


async def test_silent_truncation_warns_once_and_later_requests_fit() -> None:
    loop = Loop(ContextBudget(Window(configured=32768)), StrictServer(report_cap=6144))
    hist: list[Message] = []
    for n in range(40):
        hist = await loop.turn(hist, n, 6000)
    assert loop.warnings == 1
    assert loop.server.sent[loop.warned_at - 1] > 6144  # the request it cut
    assert max(loop.server.sent[loop.warned_at :]) <= 6144


async def test_a_large_newest_round_keeps_the_summary_and_is_clipped() -> None:
    """Not the summary's fault: it stays, and the round the model just asked for is clipped."""
    budget = ContextBudget(Window(configured=8192))
    big = read_turn(99, chars=30_000)
    hist = [*session(20), *big[:3]]
    result = await run(budget, hist, Summaries(["Goal: read every file."]))
    assert result.stage == "summary"
    assert budget.summary_failures == 0
    assert "Goal: read every file." in result.history[0].text
    assert result.history[-1].tool_call_id == "r99" and "cut here" in result.history[-1].text
    assert history_problems(result.history) == []
    assert budget.fit(SYSTEM, TOOLS, result.history).status == "fits"
