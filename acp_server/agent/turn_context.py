"""The context steps of a turn: the core of `acp_server.context`, wired to a session.

`SessionContext` is a session's budget (window, estimator, summary failures), the lookup of
the window the server reports (`window_lookup`) and what it has told the user; the session
makes it at the first turn and again when its backend is replaced. `TurnContext` is what one
turn (or a `/compact`) does with it. The loop asks it two coarse questions per round:
`request` (the next request, fitted) and `took` (the round's reply: send it again?); below
them:

- `prepare` before every model request: fits / compact first / the fixed parts alone are too
  large (then the history is untouched and the returned text says which part, by how much);
- `compact`: the stages of `context.compact` with the compaction model of the configuration
  file as the summary model when there is one, else the turn's backend,
  shown as it runs (`compaction_update`s, or a "Compacting conversation" card) and stored (the
  rebuilt history is recorded as one event, by the history itself);
- `after_overflow`: a context-overflow error teaches the window (the loop compacts and retries
  that request once);
- `after_round`: the silent-truncation guard (warn once per session, compact before the next
  request) and a `usage_update`, with the session's cost when the model has a price;
- `clip`: a tool result larger than the room that remains is clipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from acp_server import updates
from acp_server.agent.compaction_view import Shown
from acp_server.agent.history import History
from acp_server.agent.reply_cap import reply_cap
from acp_server.agent.spending import Spending, Tally
from acp_server.agent.window_lookup import WindowLookup
from acp_server.backends import Backend
from acp_server.backends.providers import Price
from acp_server.context import (
    ContextBudget,
    Fit,
    SummaryCutOff,
    ToolProfile,
    ToolRoom,
    Window,
    apply_profile,
    choose_profile,
    clip_result,
    compact,
    worth_compacting,
)
from acp_server.context.tokens import MESSAGE_OVERHEAD
from acp_server.messages import (
    ContextOverflow,
    Finish,
    Message,
    ModelRequest,
    StreamError,
    TextDelta,
    ToolSpec,
    Usage,
)
from acp_server.settings import Settings

if TYPE_CHECKING:
    from acp_server.agent.round import Reply

log = logging.getLogger(__name__)

Emit = Callable[[updates.Update], None]
ToolsFor = Callable[[ToolRoom | None], Sequence[ToolSpec]]  # the tools offered in a window
RESULT_SHARE = 0.5  # of the room for messages, the least a tool result may keep
TRUNCATION_WARNING = (
    "The model server read only about {kept:,} of the ~{sent:,} tokens it was sent, so it "
    "probably dropped the start of the conversation (the instructions and your task) without "
    "saying so. The agent now assumes a context window of {window:,} tokens and compacts the "
    "conversation to fit it (twice in a row the server read the same amount). If the model "
    "can take more, start its server with a larger context (llama.cpp `-c`, LM Studio's "
    "context length, Ollama's num_ctx); a session started or loaded after that uses the "
    "larger window."
)


class SummaryFailed(Exception):
    """The summary round ended on an error (the compaction falls back to truncation)."""


class SessionContext:
    """One session's context: the budget, the tool profile, and what the user was told."""

    output_limit: int | None = None  # the model's longest reply, when the catalogue tells
    cache_key: str | None = None  # the session's, sent for the server's prompt cache

    def __init__(self, window: Window, spending: Spending | None = None) -> None:
        self.budget = ContextBudget(window)
        self.spending = spending or Spending()
        self.warned = False  # the truncation warning is given once per session
        self.due = False  # compact before the next request (the truncation guard fired)
        self._due_at = 0  # the window it was due for
        self._profile: tuple[tuple[int, tuple[str, ...], int], ToolProfile] | None = None
        self._lookup = WindowLookup(self.window)  # the window the server reports

    def compact_next(self) -> None:
        """Compact before the next request: the window was just lowered."""
        self.due, self._due_at = True, self.window.size

    def compact_due(self) -> bool:
        """A compaction is due, for the window as it still is (not one dropped since)."""
        return self.due and self.window.size <= self._due_at

    def look_up(self, backend: Backend) -> None:
        """Start asking the server for its window (`window_lookup`), unless it told already."""
        self._lookup.start(backend)

    @property
    def looking(self) -> bool:
        return self._lookup.running

    async def settle(self, *, wait: bool) -> None:
        """Take the reported window once the lookup has answered (with `wait`, wait for it)."""
        await self._lookup.settle(wait=wait)

    @classmethod
    def made(cls, settings: Settings, spending: Spending | None) -> SessionContext:
        """A budget for the configured window (if any) and reply reserve."""
        window = Window(configured=settings.context_window)
        window.reserve = settings.reply_reserve
        return cls(window, spending)

    @property
    def window(self) -> Window:
        return self.budget.window

    def reply_limit(self, used: int | None = None) -> int | None:
        """The `max_tokens` of a model request whose prompt is about `used` tokens (`reply_cap`)."""
        return reply_cap(self.window, used, self.output_limit)

    def usage(
        self, system: str, specs: Sequence[ToolSpec], history: Sequence[Message]
    ) -> updates.Update:
        """The `usage_update` of `history` as it stands (estimated: nothing was sent yet)."""
        fit = self.budget.fit(system, self.tools(system, specs), history)
        return updates.usage(fit.used, fit.window, self.spending.shown)

    def tool_room(self) -> ToolRoom:
        """The window the tools of the next request are measured against."""
        estimator = self.budget.estimator
        return ToolRoom(self.window.size, lambda specs: estimator.corrected(estimator.tools(specs)))

    def tools(self, system: str, specs: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The tools as offered for the current window (the compact profile below ~8K)."""
        # The system prompt's length too: the project's instructions count in the fixed part.
        key = (self.window.size, tuple(s.name for s in specs), len(system))
        if self._profile is None or self._profile[0] != key:
            profile = choose_profile(key[0], system, specs, self.budget.estimator)
            log.debug("context: window %s tokens, %s", f"{key[0]:,}", profile.describe())
            self._profile = (key, profile)
        return apply_profile(self._profile[1], specs)


@dataclass
class TurnContext:
    """The context steps of one turn, with the turn's backend and where updates go."""

    session: SessionContext
    backend: Backend
    emit: Emit
    compaction_updates: bool = False  # the client shows `compaction_update`s
    price: Price | None = None  # of the turn's model (None: its cost is not known)
    summarizer: tuple[Backend, Price | None] | None = None  # a compaction model, and its price
    warnings: list[str] = field(default_factory=list)  # said when the turn ends
    fit: Fit | None = None  # the last request's fit
    tokens: Tally = field(default_factory=Tally)  # what the servers reported in this turn
    _request: tuple[str, tuple[ToolSpec, ...]] = ("", ())

    @property
    def budget(self) -> ContextBudget:
        return self.session.budget

    def begin(self, system: str, tools: tuple[ToolSpec, ...]) -> None:
        """The system prompt and tools of the requests to come (`prepare` sets them too)."""
        self._request = (system, tools)

    async def request(
        self,
        system: str,
        specs: ToolsFor,
        history: History,
        *,
        thought_level: str | None = None,
    ) -> ModelRequest | str:
        """The next model request, fitted to the window (compacted first when needed); the
        problem for a person when it cannot fit."""
        tools = await self.offer(system, specs, history)
        problem = await self.prepare(system, tools, history)
        if problem is not None:
            return problem
        return ModelRequest(
            messages=history.messages,
            tools=tools,
            system=system,
            max_tokens=self.session.reply_limit(self.fit.used if self.fit is not None else None),
            thought_level=thought_level,
            cache_key=self.session.cache_key,
        )

    async def took(self, reply: Reply, *, retry: bool) -> bool:
        """Take a round's reply: True when the server refused the request as too long before
        saying anything and `retry` allows one more (the window is learned, compact next);
        else the truncation guard and the `usage_update`."""
        if reply.overflow is not None and not reply.said_anything and retry:
            self.after_overflow(reply.overflow)
            return True
        # The usage shown and the truncation guard count against the window the server
        # reports (looked up beside the first request; by now it has usually answered).
        await self.session.settle(wait=True)
        self.after_round(reply.usage, self.budget.estimator.text("".join(reply.text)))
        return False

    async def compact_now(self, system: str, specs: ToolsFor, history: History, focus: str) -> str:
        """`/compact`: compact now, whatever the fit, for the window the server tells; the
        one-line result for a person."""
        await self.session.settle(wait=True)
        self.begin(system, self.session.tools(system, specs(self.session.tool_room())))
        return await self.compact(history, focus, manual=True)

    async def offer(
        self, system: str, specs: ToolsFor, history: Sequence[Message]
    ) -> tuple[ToolSpec, ...]:
        """The tools for the next request, as offered for the window known now. While the
        server is still asked for its window, a history that does not fit the one known so
        far waits for its answer (it may be larger) instead of compacting for nothing."""
        await self.session.settle(wait=False)
        tools = self.session.tools(system, specs(self.session.tool_room()))
        if self.session.looking and self.budget.fit(system, tools, history).status != "fits":
            await self.session.settle(wait=True)
            tools = self.session.tools(system, specs(self.session.tool_room()))
        return tools

    async def prepare(
        self, system: str, tools: tuple[ToolSpec, ...], history: History
    ) -> str | None:
        """Fit the next request, compacting first when needed; the problem for a person when
        it cannot fit (the history is then untouched), else None."""
        self.begin(system, tools)
        fit = self.budget.fit(system, tools, history)
        due = fit.status == "compact" or (self.session.compact_due() and fit.status == "fits")
        if due and worth_compacting(self.budget, system, tools, history):
            await self.compact(history)
            fit = self.budget.fit(system, tools, history)
        self.session.due = False
        self.fit = fit
        return fit.problem()

    async def compact(self, history: History, focus: str = "", manual: bool = False) -> str:
        """Compact `history` (which records the result), shown; the one-line result for a
        person."""
        system, tools = self._request
        shown = Shown(self.emit, self.compaction_updates)
        try:
            result = await compact(
                self.budget, system, tools, history, self._summarize, focus=focus, manual=manual
            )
        except asyncio.CancelledError:
            shown.ended("cancelled", "The compaction was cancelled; the conversation is unchanged.")
            raise
        except Exception:
            shown.ended("failed", "The compaction failed; the conversation is unchanged.")
            raise
        self.session.due = False
        if result.stage == "none":
            text = (
                "Nothing to compact yet: the conversation has no older part to summarize."
                if manual
                else "The conversation could not be made smaller; it is sent as it is."
            )
            shown.ended("completed", text)
            return text
        history.replace(result.history)
        log.info("context: %s %s", result.describe(), "; ".join(result.problems))
        shown.ended("completed", result.describe(), result.summary)
        self._usage(result.after)
        return result.describe()

    async def _summarize(self, request: ModelRequest) -> str | None:
        """The summary round, its text collected (a tool call is not: the summary is then
        empty); an error raises SummaryFailed. With the turn's own model it carries the
        session's cache key, as the conversation's requests do."""
        text: list[str] = []
        backend, price = self.summarizer or (self.backend, self.price)
        if self.summarizer is None:
            request = replace(request, cache_key=self.session.cache_key)
        async for event in backend.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Usage):
                self.session.spending.add(price, event)
                self.tokens.add(event)
            elif isinstance(event, StreamError):
                # Another model's window is not this session's.
                if event.overflow is not None and self.summarizer is None:
                    self.budget.after_overflow(event.overflow)
                raise SummaryFailed(event.message)
            elif isinstance(event, Finish) and event.reason == "length":
                # Half a summary would be taken for the whole conversation.
                raise SummaryCutOff("the summary was cut off by its output token limit")
        return "".join(text)

    def after_overflow(self, overflow: ContextOverflow) -> None:
        """The server refused the request as too long: learn the window, compact next."""
        before = self.budget.window.size
        self.budget.after_overflow(overflow, self.fit)
        self.session.compact_next()
        log.info(
            "context: the server refused a request as too long; window %d -> %d tokens",
            before,
            self.budget.window.size,
        )

    def after_round(self, usage: Usage | None, reply_tokens: int) -> None:
        """After a model round: the silent-truncation guard, then a `usage_update`."""
        fit = self.fit
        if fit is None:
            return
        if usage is not None:
            self.session.spending.add(self.price, usage)
            self.tokens.add(usage)
        if usage is not None and usage.prompt_tokens > 0:
            before = self.budget.window.size
            lowered = self.budget.after_round(
                fit, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens
            )
            if lowered is not None:
                self._truncated(fit, usage.prompt_tokens)
            elif self.budget.window.size > before:
                log.info("context: the server read more than the window observed; it is dropped")
            used = usage.prompt_tokens + usage.completion_tokens
            if lowered is None and usage.prompt_tokens + usage.cached_tokens < fit.used * 0.7:
                used = fit.used + reply_tokens  # a count net of a prompt cache: the estimate
        else:
            used = fit.used + reply_tokens
        self._usage(used)

    def _usage(self, used: int) -> None:
        size = self.budget.window.size
        self.emit(updates.usage(used, size, self.session.spending.shown))

    def _truncated(self, fit: Fit, kept: int) -> None:
        self.session.compact_next()
        log.warning("context: the server kept %d of ~%d prompt tokens", kept, fit.used)
        if not self.session.warned:
            self.session.warned = True
            window = self.budget.window.size
            self.warnings.append(TRUNCATION_WARNING.format(kept=kept, sent=fit.used, window=window))

    def clip(self, text: str, tool_name: str, history: Sequence[Message]) -> str:
        """A tool result that fits the room that remains (or half the room for messages,
        which the next request's compaction makes)."""
        est = self.budget.estimator
        tokens = est.corrected(est.text(text))
        if self.fit is not None and tokens <= self._share(self.fit):
            return text  # the common case, without measuring the history again
        system, tools = self._request
        fit = self.budget.fit(system, tools, history)
        limit = max(fit.room - MESSAGE_OVERHEAD, self._share(fit))
        return clip_result(text, max(limit, 0), est, tool_name)

    @staticmethod
    def _share(fit: Fit) -> int:
        """The least a tool result may keep: a share of the room for messages."""
        return int((fit.budget - fit.system - fit.tools) * RESULT_SHARE) - MESSAGE_OVERHEAD
