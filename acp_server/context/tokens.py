"""Cheap token estimates, memoized per message and corrected by what the server reports.

No tokenizer: the model behind an OpenAI-compatible URL is unknown, and a tokenizer per model
would cost more than it saves. Text counts as characters / `chars_per_token` (code and JSON
tokenize denser than prose, so the default errs high: an overestimate costs a little room, an
underestimate costs a failed request). An image counts as a fixed number of tokens, never by
its base64 size. Tool-call arguments count as their JSON text; tool specs as name, description
and JSON schema.

Counts are *raw* (uncorrected) and memoized per `Message` instance. `Message` is a frozen
dataclass whose hash would walk its content (and fails on dict arguments), so the memo is keyed
by `id()` and guarded by a weak reference: an entry is used only while it still points at the
very same object, and it is dropped when that object dies (so a reused id never matches).

`factor` turns raw counts into the server's tokens; `observe(raw, reported)` learns it from the
prompt tokens the server reports after a round: up at once (an underestimate is the dangerous
side), down halfway per observation.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Sequence
from functools import partial

from acp_server.messages import Message, TextPart, ToolSpec

CHARS_PER_TOKEN = 3.5
IMAGE_TOKENS = 1000
MESSAGE_OVERHEAD = 4  # role and framing tokens every chat template adds per message
TOOL_OVERHEAD = 10  # per tool spec: the wrapper the server renders around it
CALL_OVERHEAD_CHARS = 24  # per tool call: id, type and braces on the wire
# Real tokenizers land between ~4.4 characters a token (English prose) and ~1 (CJK, counted
# by bytes here); below 0.8 a report is more likely a server that dropped part of the prompt.
MIN_FACTOR, MAX_FACTOR = 0.8, 4.0
MIN_SAMPLE = 100  # raw tokens below which a reported count says little about the ratio

_Entry = tuple["weakref.ref[Message]", int, int]


def text_size(text: str) -> int:
    """Characters, with non-ASCII text counted by its UTF-8 bytes (CJK is ~1 token a char)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


def _forget(cache: dict[int, _Entry], key: int, ref: weakref.ref[Message]) -> None:
    entry = cache.get(key)
    if entry is not None and entry[0] is ref:
        del cache[key]


class Estimator:
    """Token estimates for one session (one model): a memo per message and a learned factor."""

    def __init__(
        self, chars_per_token: float = CHARS_PER_TOKEN, image_tokens: int = IMAGE_TOKENS
    ) -> None:
        self.chars_per_token = chars_per_token
        self.image_tokens = image_tokens
        self.factor = 1.0
        self._cache: dict[int, _Entry] = {}

    # ----- raw counts --------------------------------------------------------------------------

    def text(self, text: str) -> int:
        """Raw tokens of a piece of text (no per-message overhead)."""
        return math.ceil(text_size(text) / self.chars_per_token)

    def message(self, message: Message) -> tuple[int, int]:
        """(raw tokens, of which image tokens) of one message, memoized per instance."""
        key = id(message)
        entry = self._cache.get(key)
        if entry is not None and entry[0]() is message:
            return entry[1], entry[2]
        tokens, images = self._count(message)
        ref = weakref.ref(message, partial(_forget, self._cache, key))
        self._cache[key] = (ref, tokens, images)
        return tokens, images

    def messages(self, messages: Sequence[Message]) -> int:
        """Raw tokens of several messages."""
        return sum(self.message(m)[0] for m in messages)

    def tools(self, specs: Sequence[ToolSpec]) -> int:
        """Raw tokens of the tool specs as offered to the model."""
        total = 0
        for spec in specs:
            chars = len(spec.name) + text_size(spec.description)
            chars += text_size(json.dumps(spec.parameters, ensure_ascii=False))
            total += TOOL_OVERHEAD + math.ceil(chars / self.chars_per_token)
        return total

    def _count(self, message: Message) -> tuple[int, int]:
        chars = 0
        images = 0
        for part in message.content:
            if isinstance(part, TextPart):
                chars += text_size(part.text)
            else:
                images += 1
        for call in message.tool_calls:
            chars += CALL_OVERHEAD_CHARS + len(call.name)
            if call.invalid_arguments is not None:
                chars += text_size(call.invalid_arguments)
            elif call.arguments:
                chars += text_size(json.dumps(call.arguments, ensure_ascii=False))
        image_tokens = images * self.image_tokens
        tokens = MESSAGE_OVERHEAD + math.ceil(chars / self.chars_per_token) + image_tokens
        return tokens, image_tokens

    # ----- correction ------------------------------------------------------------------------

    def corrected(self, raw: int) -> int:
        """Raw tokens as the server is expected to count them."""
        return math.ceil(raw * self.factor)

    def chars_for(self, tokens: int) -> int:
        """How many characters of plain text fit in `tokens` (corrected) tokens."""
        return max(int(tokens * self.chars_per_token / self.factor), 0)

    def observe(self, raw: int, reported: int) -> None:
        """Learn the factor from the server's count of a prompt we estimated at `raw`.

        Leave image tokens out of `raw` (servers count images very differently); their real
        cost then only makes the ratio higher, the safe direction.
        """
        if raw < MIN_SAMPLE or reported <= 0:
            return
        ratio = min(max(reported / raw, MIN_FACTOR), MAX_FACTOR)
        self.factor = ratio if ratio > self.factor else (self.factor + ratio) / 2
