"""The context steps of a turn: the core of `acp_server.context`, wired to a session.

`SessionContext` is a session's budget (window, estimator, summary failures) and what it has
told the user; the session makes it at the first turn and again when its backend is replaced.
`TurnContext` is what one turn (or a `/compact`) does with it:

- `prepare` before every model request: fits / compact first / the fixed parts alone are too
  large (then the history is untouched and the returned text says which part, by how much);
- `compact`: the stages of `context.compact` with the compaction model of the configuration
  file as the summary model when there is one, else the turn's backend,
  shown as it runs (`compaction_update`s, or a "Compacting conversation" card) and stored (the
  rebuilt history goes to the recorder as one event);
- `after_overflow`: a context-overflow error teaches the window (the loop compacts and retries
  that request once);
- `after_round`: the silent-truncation guard (warn once per session, compact before the next
  request) and a `usage_update`, with the session's cost when the model has a price;
- `clip`: a tool result larger than the room that remains is clipped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp_server import updates
from acp_server.agent.history import History
from acp_server.agent.reply_cap import reply_cap
from acp_server.backends import Backend
from acp_server.backends.providers import Price
from acp_server.context import (
    ContextBudget,
    Fit,
    ToolProfile,
    Window,
    apply_profile,
    choose_profile,
    clip_result,
    compact,
)
from acp_server.context.tokens import MESSAGE_OVERHEAD
from acp_server.messages import (
    ContextOverflow,
    Message,
    ModelRequest,
    StreamError,
    TextDelta,
    ToolSpec,
    Usage,
)
from acp_server.settings import Settings

log = logging.getLogger(__name__)

WINDOW_LOOKUP_SECONDS = 3.0


async def reported_window(backend: Backend) -> int | None:
    """The window the model server reports; None when it does not say (or fails to)."""
    try:
        # Not `asyncio.wait_for`: on Python 3.11 it swallows a cancel that arrives as the
        # lookup finishes, and the cancelled turn would then run to its end.
        async with asyncio.timeout(WINDOW_LOOKUP_SECONDS):
            return await backend.context_window()
    except (TimeoutError, Exception):
        log.debug("context window lookup failed", exc_info=True)
        return None


Emit = Callable[[updates.Update], None]
RESULT_SHARE = 0.5  # of the room for messages, the least a tool result may keep
CARD_TITLE = "Compacting conversation"
TRUNCATION_WARNING = (
    "The model server read only about {kept:,} of the ~{sent:,} tokens it was sent, so it "
    "probably dropped the start of the conversation (the instructions and your task) without "
    "saying so. The agent now assumes a context window of {window:,} tokens and compacts the "
    "conversation to fit it. If the model can take more, start its server with a larger "
    "context (llama.cpp `-c`, LM Studio's context length, Ollama's num_ctx) or set "
    "--context-window / ACP_SERVER_CONTEXT_WINDOW to the real size."
)


class SummaryFailed(Exception):
    """The summary round ended on an error (the compaction falls back to truncation)."""


@dataclass
class Spending:
    """What a session has cost, in US dollars, from the tokens the servers reported and the
    prices of the configuration file (per million tokens). It is the session's, so it outlives
    the budget a model switch makes anew; it is not stored (a loaded session starts at zero)."""

    amount: float = 0.0
    priced: bool = False  # some round had a price: the cost is shown from then on

    def add(self, price: Price | None, usage: Usage) -> None:
        if price is not None:
            spent = usage.prompt_tokens * price.input + usage.completion_tokens * price.output
            self.amount += spent / 1_000_000
            self.priced = True

    @property
    def shown(self) -> float | None:
        return self.amount if self.priced else None


class SessionContext:
    """One session's context: the budget, the tool profile, and what the user was told."""

    output_limit: int | None = None  # the model's longest reply, when the catalogue tells

    def __init__(self, window: Window, spending: Spending | None = None) -> None:
        self.budget = ContextBudget(window)
        self.spending = spending or Spending()
        self.warned = False  # the truncation warning is given once per session
        self.due = False  # compact before the next request (the truncation guard fired)
        self._profile: tuple[tuple[int, tuple[str, ...]], ToolProfile] | None = None
        self._lookup: asyncio.Task[int | None] | None = None  # the window the server reports

    def look_up(self, backend: Backend) -> None:
        """Start asking the server for its window, unless it told already or is being asked.
        The turn does not wait for it (two requests on a cold connection, before the first
        reply could start): it is taken when it has answered, or awaited when the history
        does not fit the window known so far (`settle`)."""
        if self.window.discovered is None and self._lookup is None:
            self._lookup = asyncio.create_task(reported_window(backend), name="window-lookup")

    @property
    def looking(self) -> bool:
        return self._lookup is not None

    async def settle(self, *, wait: bool) -> None:
        """Take the reported window once the lookup has answered (with `wait`, wait for it)."""
        lookup = self._lookup
        if lookup is None or not (wait or lookup.done()):
            return
        # Shielded: a cancelled turn must not cancel the lookup the session shares.
        found = await asyncio.shield(lookup)
        self._lookup = None
        if found is not None:
            self.window.discovered = found

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

    def tools(self, system: str, specs: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The tools as offered for the current window (the compact profile below ~8K)."""
        key = (self.window.size, tuple(s.name for s in specs))
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
    _request: tuple[str, tuple[ToolSpec, ...]] = ("", ())

    @property
    def budget(self) -> ContextBudget:
        return self.session.budget

    def begin(self, system: str, tools: tuple[ToolSpec, ...]) -> None:
        """The system prompt and tools of the requests to come (`prepare` sets them too)."""
        self._request = (system, tools)

    async def offer(
        self, system: str, specs: Sequence[ToolSpec], history: Sequence[Message]
    ) -> tuple[ToolSpec, ...]:
        """The tools for the next request, as offered for the window known now. While the
        server is still asked for its window, a history that does not fit the one known so
        far waits for its answer (it may be larger) instead of compacting for nothing."""
        await self.session.settle(wait=False)
        tools = self.session.tools(system, specs)
        if self.session.looking and self.budget.fit(system, tools, history).status != "fits":
            await self.session.settle(wait=True)
            tools = self.session.tools(system, specs)
        return tools

    async def prepare(
        self, system: str, tools: tuple[ToolSpec, ...], history: History
    ) -> str | None:
        """Fit the next request, compacting first when needed; the problem for a person when
        it cannot fit (the history is then untouched), else None."""
        self.begin(system, tools)
        fit = self.budget.fit(system, tools, history)
        if fit.status == "compact" or (self.session.due and fit.status == "fits"):
            await self.compact(history)
            fit = self.budget.fit(system, tools, history)
        self.fit = fit
        return fit.problem()

    async def compact(self, history: History, focus: str = "", manual: bool = False) -> str:
        """Compact `history` (which records the result), shown; the one-line result for a
        person."""
        system, tools = self._request
        shown = _Shown(self.emit, self.compaction_updates)
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
            text = "Nothing to compact yet: the conversation has no older part to summarize."
            shown.ended("completed", text)
            return text
        history.replace(result.history)
        log.info("context: %s %s", result.describe(), "; ".join(result.problems))
        shown.ended("completed", result.describe(), result.summary)
        self._usage(result.after)
        return result.describe()

    async def _summarize(self, request: ModelRequest) -> str | None:
        """The summary round: tool-free, its text collected; an error raises SummaryFailed."""
        text: list[str] = []
        backend, price = self.summarizer or (self.backend, self.price)
        async for event in backend.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Usage):
                self.session.spending.add(price, event)
            elif isinstance(event, StreamError):
                # Another model's window is not this session's.
                if event.overflow is not None and self.summarizer is None:
                    self.budget.after_overflow(event.overflow)
                raise SummaryFailed(event.message)
        return "".join(text)

    def after_overflow(self, overflow: ContextOverflow) -> None:
        """The server refused the request as too long: learn the window, compact next."""
        before = self.budget.window.size
        self.budget.after_overflow(overflow, self.fit)
        self.session.due = True
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
        if usage is not None and usage.prompt_tokens > 0:
            lowered = self.budget.after_round(fit, usage.prompt_tokens)
            if lowered is not None:
                self._truncated(fit, usage.prompt_tokens)
            used = usage.prompt_tokens + usage.completion_tokens
        else:
            used = fit.used + reply_tokens
        self._usage(used)

    def _usage(self, used: int) -> None:
        size = self.budget.window.size
        self.emit(updates.usage(used, size, self.session.spending.shown))

    def _truncated(self, fit: Fit, kept: int) -> None:
        self.session.due = True
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


class _Shown:
    """A compaction as the user sees it: `compaction_update`s when the client shows them,
    else a tool-call card of kind `think`."""

    def __init__(self, emit: Emit, native: bool) -> None:
        self._emit = emit
        self._native = native
        self._id = f"compact_{uuid.uuid4().hex[:12]}"
        if native:
            emit(compaction_update(self._id, "in_progress"))
        else:
            emit(updates.tool_call(self._id, CARD_TITLE, name="compact", kind="think"))
            emit(updates.tool_call_update(self._id, status="in_progress"))

    def ended(self, status: str, line: str, summary: str = "") -> None:
        if not self._native:
            final = "completed" if status == "completed" else "failed"
            content = [updates.text_content(line)]
            self._emit(updates.tool_call_update(self._id, status=final, content=content))
            return
        for text in _chunks(summary or line) if status == "completed" else ():
            self._emit(
                {
                    "sessionUpdate": "compaction_summary_chunk",
                    "compactionId": self._id,
                    "content": updates.text_block(text),
                }
            )
        self._emit(compaction_update(self._id, status, error=line if status == "failed" else None))


def compaction_update(compaction_id: str, status: str, **fields: Any) -> updates.Update:
    update: updates.Update = {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": status,
    }
    update.update({k: v for k, v in fields.items() if v is not None})
    return update


def _chunks(text: str) -> list[str]:
    """The summary in paragraphs, as it would have streamed."""
    parts = text.split("\n\n")
    return [p + ("\n\n" if i < len(parts) - 1 else "") for i, p in enumerate(parts) if p]


def as_card(update: updates.Update) -> list[updates.Update]:
    """A stored (terminal) `compaction_update`, for a client that does not show them: the same
    compaction as a card of kind `think` (on replay)."""
    summary = update.get("summary") or []
    text = "".join(b.get("text", "") for b in summary if isinstance(b, dict))
    status = "completed" if update.get("status") == "completed" else "failed"
    card_id = str(update.get("compactionId"))
    line = text or str(update.get("error") or "The compaction did not complete.")
    return [
        updates.tool_call(card_id, CARD_TITLE, name="compact", kind="think", status=status),
        updates.tool_call_update(card_id, status=status, content=[updates.text_content(line)]),
    ]
