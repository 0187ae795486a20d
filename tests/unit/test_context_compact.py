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
    MAX_SUMMARY_FAILURES,
    Compaction,
    compact,
    worth_compacting,
)
from acp_server.context.fit import ContextBudget
from acp_server.context.state import is_state_message
from acp_server.context.summary_round import shrank
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
        text_message("assistant", f"answer {n}: " + "f{n} sets x to one, and then returns. " * 12),
    ]


def session(turns: int) -> list[Message]:
    """`turns` exchanges that each read a file and answer at some length: pruning frees the
    reads, never the answers, so a long one needs a summary in a small window."""
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


async def test_pruning_goes_closer_in_when_the_last_two_exchanges_do_not_fit() -> None:
    budget = ContextBudget(Window(configured=8192))
    newest = read_turn(99)[:3]
    hist = [*session(4), *newest]
    result = await run(budget, hist, Summaries())
    assert result.stage == "prune"
    by_id = {m.tool_call_id: m.text for m in result.history if m.role == "tool"}
    assert by_id["r3"].startswith("[Output removed")  # the previous exchange's read
    assert result.history[-1] is newest[-1]  # the file the model just asked for, whole


async def test_the_current_prompt_alone_is_never_compacted() -> None:
    budget = ContextBudget(Window(configured=8192))
    prompt = text_message("user", "Please review this paste:\n" + "paste line\n" * 1700)
    fit = budget.fit(SYSTEM, TOOLS, [prompt])
    assert fit.status == "compact"  # 85-100 % of the budget: it fits, and nothing is older
    assert not worth_compacting(budget, SYSTEM, TOOLS, [prompt])
    result = await run(budget, [prompt], Summaries())
    assert result.stage == "none" and result.history == [prompt]


async def test_a_near_budget_prompt_after_a_conversation_stays_verbatim() -> None:
    budget = ContextBudget(Window(configured=8192))
    prompt = text_message("user", "Please review this paste:\n" + "paste line\n" * 1600)
    hist = [*session(6), prompt]
    for summaries in (Summaries(["Goal: review pastes."]), Summaries([None])):
        result = await run(budget, hist, summaries)
        assert result.stage in ("summary", "truncate")
        assert result.history[-1] is prompt  # the user's words, not wrapped in a note
        assert prompt.text not in result.history[0].text
        assert result.after < result.before
        assert history_problems(result.history) == []


async def test_a_compaction_that_leaves_the_request_above_the_trigger_is_not_repeated() -> None:
    """A newest round that alone nearly fills the budget: pruning leaves the request above the
    trigger, and the next requests do not compact again until the history has grown."""
    budget = ContextBudget(Window(configured=8192))
    big = read_turn(99, 16_000)
    hist = [*session(4), *big[:3]]
    result = await run(budget, hist, Summaries())
    after = budget.fit(SYSTEM, TOOLS, result.history)
    assert after.used > after.trigger and budget.floor == result.after
    grown = [*result.history, big[3], text_message("user", "thanks")]
    assert budget.fit(SYSTEM, TOOLS, grown).status == "fits"
    more = [*grown, *read_turn(100, 3000)[1:3]]  # grown by a clear share of the room
    assert budget.fit(SYSTEM, TOOLS, more).status == "compact"


async def test_a_summary_that_would_free_little_beside_a_large_newest_round_is_skipped() -> None:
    """Nothing older to prune, a few short messages before a file that fills most of the
    window: a summary round would free almost nothing, so nothing is compacted or shown."""
    budget = ContextBudget(Window(configured=8192))
    chat = [text_message("user", "hello"), text_message("assistant", "Hello! What next?")]
    hist = [*chat, *read_turn(99, 18_500)[:3]]
    fit = budget.fit(SYSTEM, TOOLS, hist)
    assert fit.status == "compact" and fit.used <= fit.budget
    assert not worth_compacting(budget, SYSTEM, TOOLS, hist)
    summaries = Summaries()
    result = await run(budget, hist, summaries)
    assert result.stage == "none" and result.history == hist and summaries.requests == []


def close_call_history() -> list[Message]:
    """Older reads pruning can remove, an exchange without tools, then the file the model just
    asked for: every way of pruning leaves the same request."""
    chat = [text_message("user", "and the tests?"), text_message("assistant", "They pass. " * 40)]
    newest = read_turn(99, 3000)[:3]
    return [*(m for n in range(4) for m in read_turn(n, 3000)), *chat, *newest]


async def stage_with(pad: int, budget: ContextBudget) -> str:
    """The stage a compaction of `close_call_history()` takes with `pad` more characters of
    system prompt (a longer working directory)."""
    result = await compact(budget, SYSTEM + "p" * pad, TOOLS, close_call_history(), Summaries())
    return result.stage


async def after_a_summary() -> ContextBudget:
    """A budget whose last compaction needed a summary."""
    budget = ContextBudget(Window(configured=8192))
    hist = [*session(30), text_message("user", "go on")]
    assert (await run(budget, hist, Summaries())).stage == "summary"
    return budget


async def switch_point(primed: bool) -> int:
    """The fewest characters of system prompt from which the compaction summarizes."""

    async def stage(pad: int) -> str:
        budget = await after_a_summary() if primed else ContextBudget(Window(configured=8192))
        return await stage_with(pad, budget)

    low, high = 0, 20_000
    assert await stage(low) == "prune" and await stage(high) == "summary"
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if await stage(middle) == "summary" else (middle, high)
    return high


async def test_the_choice_between_pruning_and_a_summary_has_slack() -> None:
    """A fresh session prunes up to a point; one that just summarized summarizes from a point
    well below it: between the two, a few tokens do not decide."""
    fresh, primed = await switch_point(False), await switch_point(True)
    assert fresh - primed >= 700  # ~200 tokens: a long path, several times over


async def test_a_session_hovering_at_the_goal_keeps_one_stage() -> None:
    """Requests a few tokens either side of the middle of the band: the stage never flips."""
    middle = (await switch_point(False) + await switch_point(True)) // 2
    for budget in (ContextBudget(Window(configured=8192)), await after_a_summary()):
        stages = [await stage_with(middle + (60 if n % 2 else -60), budget) for n in range(6)]
        assert len(set(stages)) == 1, stages


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
    summaries: Summaries = field(default_factory=Summaries)

    async def request(self, hist: list[Message]) -> list[Message]:
        for attempt in range(2):
            fit = self.budget.fit(SYSTEM, self.tools, hist)
            assert fit.status != "too_large", fit.problem()
            if fit.status == "compact" and worth_compacting(self.budget, SYSTEM, self.tools, hist):
                hist = (
                    await compact(self.budget, SYSTEM, self.tools, hist, self.summaries)
                ).history
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
    # Compaction leaves room: at most one per turn (two reads do not fit under the trigger),
    # mostly prunes, and a summary round at most every third turn.
    assert loop.compactions <= 60
    assert len(loop.summaries.requests) <= 20


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


async def test_the_summary_is_asked_as_the_conversations_next_request() -> None:
    budget = ContextBudget(Window(configured=32768))
    hist = [*session(10), text_message("user", "the latest request")]
    summaries = Summaries(["Goal: read the files."])
    result = await run(budget, hist, summaries, manual=True)
    assert result.stage == "summary" and result.summary == "Goal: read the files."
    (request,) = summaries.requests
    # The prefix a provider's cache holds from the request before: system, tools, history.
    assert request.system == SYSTEM and request.tools == TOOLS
    assert request.messages[:-1] == tuple(hist)
    ask = request.messages[-1]
    assert ask.role == "user" and "<summary-request>" in ask.text
    kept = next(m for m in result.history if any(m is h for h in hist))  # the verbatim tail
    assert f"begins «{kept.text[:40]}" in ask.text  # is named, not to be summarized
    assert request.purpose == "summary"


async def test_a_failed_summary_in_the_conversation_is_asked_again_as_a_transcript() -> None:
    budget = ContextBudget(Window(configured=32768))
    hist = [*session(10), text_message("user", "the latest request")]
    summaries = Summaries([RuntimeError("HTTP 400: tools"), "Goal: read the files."])
    result = await run(budget, hist, summaries, manual=True)
    assert result.stage == "summary" and budget.summary_failures == 0
    first, second = summaries.requests
    assert first.tools == TOOLS and second.tools == ()  # the plain-text fallback
    assert all(m.role == "user" for m in second.messages)
