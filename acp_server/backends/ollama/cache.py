"""Ollama's prompt counts read as whole prompts, when its prompt cache made them net.

Older Ollama servers (and llama.cpp behind them) report `prompt_eval_count` as the tokens they
had to read anew: a request that extends the previous one is counted without the part the
cache still held. Taken as the prompt's size, such a count looks like a server that dropped
most of the prompt, and the agent would shrink its window to it. So a count is read here
against the request before it: when this request's history extends that one's and the count is
below that one's prompt, the cached part is added back (and reported as `cached_tokens`).
A newer server's full count is never below the prompt it extends, and is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from acp_server.messages import Message, Usage


class PromptCache:
    """The previous request's history and whole prompt count, per backend."""

    def __init__(self) -> None:
        self._last: tuple[str, tuple[Message, ...], int] | None = None

    def read(self, system: str, messages: Sequence[Message], usage: Usage) -> Usage:
        """`usage` with the whole prompt counted."""
        history = tuple(messages)
        last = self._last
        cached = 0
        if (
            last is not None
            and last[0] == system
            and history[: len(last[1])] == last[1]
            and 0 < usage.prompt_tokens < last[2]
        ):
            cached = last[2]
        whole = replace(usage, prompt_tokens=usage.prompt_tokens + cached)
        if cached:
            whole = replace(whole, cached_tokens=max(usage.cached_tokens, cached))
        self._last = (system, history, whole.prompt_tokens)
        return whole
