"""Compaction stage (b)'s model round: the summary asked for, and whether its reply is used.

It is asked first as the conversation's own next request (`summary.prefix_request`), so that a
provider's prompt cache serves nearly all of it, when that leaves a quarter of the budget to
spare (`PREFIX_SHARE`: estimates run short of a server's count); else, or when that round
fails, from a plain-text transcript with no tools (`summary.summary_request`, which is fitted).
A reply is used only when it has text, is clearly shorter than what it replaces (`shrank`) and
kept to the length asked for. A failed round is a reason to fall back (compaction then
truncates), never a failed turn; a summary cut off by its output limit (`SummaryCutOff`) is not
asked again from the transcript, where it would be as long. Cancellation propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from acp_server.context.summary import prefix_request, summary_request
from acp_server.context.tokens import MESSAGE_OVERHEAD, Estimator
from acp_server.messages import Message, ModelRequest, ToolSpec

log = logging.getLogger(__name__)

# Runs a summary request and returns the summary text; None or "" for a failure.
Summarize = Callable[[ModelRequest], Awaitable[str | None]]
Prefix = tuple[str, tuple[ToolSpec, ...], tuple[Message, ...]]  # system, tools, history as sent
PREFIX_SHARE = 0.75  # of the budget, the most a summary asked in the conversation's terms takes
SHRINK_MARGIN = 0.1  # a stage must shrink the request by at least this share


class SummaryCutOff(Exception):
    """`summarize` says the summary was cut off by its output limit: asked again from the
    transcript, it would be as long, so the compaction goes on to truncation."""


def shrank(before: int, after: int, margin: float = SHRINK_MARGIN) -> bool:
    """Did a stage shrink the request by a clear margin?"""
    return after <= before * (1 - margin)


async def ask_summary(
    older: Sequence[Message],
    summarize: Summarize,
    focus: str,
    *,
    prefix: Prefix,
    used: int,
    budget: int,
    est: Estimator,
    reply_tokens: int,
) -> tuple[str | None, str]:
    """The summary of `older` (the history's start, before the kept tail), and "", or None and
    why it failed. `prefix` is the request that asked for the compaction, `used` its tokens,
    `budget` the window's."""
    system, tools, history = prefix
    requests = []
    if history and len(older) < len(history):
        first_kept = history[len(older)]
        ask = prefix_request(system, tools, history, first_kept, reply_tokens, focus)
        asked = used + est.corrected(est.text(ask.messages[-1].text) + MESSAGE_OVERHEAD)
        if asked <= budget * PREFIX_SHARE:
            requests.append(ask)
    requests.append(summary_request(older, est, budget, reply_tokens, focus))
    why = ""
    for request in requests:
        try:
            text, why = await _asked(request, summarize, older, est, reply_tokens)
        except SummaryCutOff as exc:
            return None, f"the summary round failed: {exc}"
        if text is not None:
            return text, ""
    return None, why


async def _asked(
    request: ModelRequest,
    summarize: Summarize,
    older: Sequence[Message],
    est: Estimator,
    reply_tokens: int,
) -> tuple[str | None, str]:
    """One summary round: (the summary, "") or (None, why it is not used)."""
    try:
        text = await summarize(request)
    except SummaryCutOff:
        raise
    except Exception as exc:  # a failed round is a reason to fall back, never a failed turn
        log.warning("context: the summary round failed: %s", exc)
        return None, f"the summary round failed: {exc}"
    if not text or not text.strip():
        return None, "the summary came back empty"
    size = est.text(text)
    if not shrank(est.messages(older), size):
        return None, "the summary was not clearly shorter than what it replaced"
    if est.corrected(size) > reply_tokens * 3 // 2:  # the server ignored max_tokens
        return None, f"the summary was longer than the {reply_tokens:,} tokens asked for"
    return text.strip(), ""
