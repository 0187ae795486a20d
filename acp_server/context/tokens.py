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

The correction is a line, learned from the prompt tokens the server reports after a round:
`reported ≈ factor · raw + overhead`. `factor` scales everything we count; `overhead` (≥ 0) is
what the server renders around the fixed part that we do not count at all, such as a chat
template's tool preamble. One factor alone cannot tell the two apart: under llama-cpp-python's
chatml-function-calling template a constant few hundred template tokens made the first reports
~1.5-4x our estimate of a short prompt, the factor rose to match, and then multiplied the whole
history and the fixed part too, until a prompt that fitted was judged "too large" (the fixed
part alone over the budget) and every later turn failed.

`observe` keeps the last few reports of the current fixed part (`forget_fixed` drops them when
the system prompt or tool set changes). While they span too little of the history to show a
slope, an excess over `factor · raw` is taken as overhead (the factor stays), and a shortfall
lowers the factor halfway, overhead 0. Once they span `MIN_SPREAD` raw tokens, a least-squares
line through them gives the factor (its slope, clamped, and never above the smallest
reported/raw ratio: the overhead is never negative) and the overhead (its intercept), raised
if needed so the newest report is never underestimated (an underestimate is the dangerous side).
"""

from __future__ import annotations

import json
import math
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Generic, TypeVar

from acp_server.messages import Message, TextPart, ToolSpec

K = TypeVar("K")
V = TypeVar("V")

CHARS_PER_TOKEN = 3.5
IMAGE_TOKENS = 1000
MESSAGE_OVERHEAD = 4  # role and framing tokens every chat template adds per message
TOOL_OVERHEAD = 10  # per tool spec: the wrapper the server renders around it
CALL_OVERHEAD_CHARS = 24  # per tool call: id, type and braces on the wire
# Real tokenizers land between ~4.4 characters a token (English prose) and ~1 (CJK, counted
# by bytes here); below 0.8 a report is more likely a server that dropped part of the prompt.
MIN_FACTOR, MAX_FACTOR = 0.8, 4.0
MIN_SAMPLE = 100  # raw tokens below which a reported count says little about the ratio
SAMPLES = 6  # reports the line is fitted to
MIN_SPREAD = 200  # raw tokens between the smallest and largest report before a slope is fitted

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
        self.overhead = 0  # tokens the server adds around the fixed part (see the docstring)
        self._reports: deque[tuple[int, int]] = deque(maxlen=SAMPLES)
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
            total += TOOL_OVERHEAD + math.ceil(_spec_chars(spec) / self.chars_per_token)
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
                # As the OpenAI wire sends them: non-ASCII escaped, "\u00e9" is 6 characters
                # and several tokens (counted as UTF-8 bytes it looked like half a token).
                chars += len(json.dumps(call.arguments))
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
        """Learn the correction from the server's count of a prompt we estimated at `raw`.

        Leave image tokens out of `raw` (servers count images very differently); their real
        cost then only makes the correction higher, the safe direction.
        """
        if raw < MIN_SAMPLE or reported <= 0:
            return
        self._reports.append((raw, reported))
        xs = [x for x, _ in self._reports]
        if max(xs) - min(xs) >= MIN_SPREAD:
            self._fit_line()
        elif reported >= raw * self.factor:
            self.overhead = math.ceil(reported - raw * self.factor)
        else:
            ratio = min(max(reported / raw, MIN_FACTOR), MAX_FACTOR)
            self.factor, self.overhead = (self.factor + ratio) / 2, 0

    def forget_fixed(self) -> None:
        """The fixed part changed (system prompt or tools): its overhead is unknown again."""
        self._reports.clear()
        self.overhead = 0

    def _fit_line(self) -> None:
        n = len(self._reports)
        mx = sum(x for x, _ in self._reports) / n
        my = sum(y for _, y in self._reports) / n
        sxx = sum((x - mx) ** 2 for x, _ in self._reports)
        sxy = sum((x - mx) * (y - my) for x, y in self._reports)
        # The overhead is never negative, so no report is below factor * raw: the slope can
        # never exceed the smallest reported/raw ratio. A narrow spread of noisy reports
        # (contents that tokenize differently) would otherwise fit a slope far steeper than
        # any report shows, and overestimate every request after it.
        steepest = max(min(y / x for x, y in self._reports), MIN_FACTOR)
        self.factor = min(max(sxy / sxx, MIN_FACTOR), MAX_FACTOR, steepest)
        raw, reported = self._reports[-1]
        newest = reported - raw * self.factor
        self.overhead = max(math.ceil(max(my - self.factor * mx, newest)), 0)


class ByIdentity(Generic[K, V]):
    """Values worked out once per object (and `key`): for tool specs, which are frozen and
    whose schemas are constants, measured or shortened for every profile a session tries.
    Each object is held with its value, so that its id names no other meanwhile; past `most`
    entries the cache starts afresh."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._values: dict[tuple[int, Hashable], tuple[K, V]] = {}

    def get(self, obj: K, key: Hashable, make: Callable[[], V]) -> V:
        cached = self._values.get((id(obj), key))
        if cached is not None and cached[0] is obj:
            return cached[1]
        value = make()
        if len(self._values) >= self._most:
            self._values.clear()
        self._values[(id(obj), key)] = (obj, value)
        return value


def _spec_chars(spec: ToolSpec) -> int:
    """The characters of a tool as offered (once per spec object)."""

    def measure() -> int:
        chars = len(spec.name) + text_size(spec.description)
        return chars + text_size(json.dumps(spec.parameters, ensure_ascii=False))

    return _SPEC_CHARS.get(spec, None, measure)


_SPEC_CHARS: ByIdentity[ToolSpec, int] = ByIdentity(1024)
