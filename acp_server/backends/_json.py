"""JSON from model servers, with lone surrogates replaced.

A stream may carry `\\ud83d` without its second half (a server that cut an emoji between two
chunks and escaped each half alone). Python decodes it into a lone surrogate, a string that
cannot be encoded as UTF-8: writing it to the editor or the store would fail far from here.
So every JSON frame of a model's stream is read by `loads`, which replaces each lone surrogate
with U+FFFD, the replacement character, as a UTF-8 decoder does with a broken byte.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# A `\u` escape in the surrogate range: only then can the decoded value hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def loads(text: str | bytes) -> Any:
    """`json.loads`, with every lone surrogate in the decoded strings replaced. Called for
    every delta of a stream: a frame without any `\\u` escape (most) costs one substring
    search, not a decoded copy and a pattern search (~1 us a delta)."""
    value = json.loads(text)
    if isinstance(text, str):
        found = "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None
    else:
        found = b"\\u" in text and _SURROGATE_ESCAPE_BYTES.search(text) is not None
    return clean(value) if found else value


def clean(value: Any) -> Any:
    """`value` with lone surrogates replaced in every string, keys included."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    return value
