"""Recognize a context-overflow error and read the window (and the prompt size) out of it.

Servers say it in many ways; the ones we know (an error's message, or its raw JSON body):

- OpenAI, vLLM, llama-cpp-python's server: "This model's maximum context length is 2048 tokens.
  However, you requested 2126 tokens (2110 in the messages, 16 in the completion)."
- llama.cpp's server: `{"error": {"type": "exceed_context_size_error", "message": "request
  (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
  "n_prompt_tokens": 4476, "n_ctx": 4096}}` (older builds leave the numbers out of the message)
- llama-cpp-python's library: "Requested tokens (757) exceed context window of 512"
- Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
- LM Studio: "... the model is loaded with context length of only 4096 tokens ..."
- Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)"
- Ollama and others without numbers: "... exceeds the context length", "context window full".

`parse_overflow` answers None for anything else, an `Overflow` with the window and the prompt
size when the text gives them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_MARKERS = re.compile(
    r"context[ _-]?(length|window|size)|too many tokens|maximum context|prompt is too long"
    r"|exceeds? (the )?(available |maximum )?context|exceed_context_size|tokens? exceed"
    r"|maximum number of tokens allowed",
    re.IGNORECASE,
)
_WINDOW = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum context length is (\d+)",
        r"available context size \((\d+)",
        r"tokens? > (\d+) maximum",
        r"context window of (\d+)",
        r"context length of only (\d+)",
        r"maximum number of tokens allowed \((\d+)",
        r"\bn_ctx\D{1,4}(\d+)",
    )
]
_PROMPT = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"(\d+) in the messages",
        r"messages resulted in (\d+) tokens",
        r"request has (\d+) input tokens",
        r"request \((\d+) tokens\)",
        r"prompt is too long: (\d+) tokens",
        r"requested tokens \((\d+)\)",
        r"input token count \((\d+)\)",
        r"n_prompt_tokens\D{1,4}(\d+)",
    )
]


@dataclass(frozen=True)
class Overflow:
    window: int | None = None  # the server's window, when it said
    prompt_tokens: int | None = None  # the server's count of the prompt we sent, when it said


def parse_overflow(text: str) -> Overflow | None:
    """The overflow described by an error message or raw error body; None if it is not one."""
    fields = _json_fields(text)
    window = _int(fields.get("n_ctx")) or _first(_WINDOW, text)
    prompt = _int(fields.get("n_prompt_tokens")) or _first(_PROMPT, text)
    if window is None and prompt is None and not _MARKERS.search(text):
        return None
    return Overflow(window, prompt)


def _first(patterns: list[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def _json_fields(text: str) -> dict[str, Any]:
    """The error object of a JSON body (`{"error": {...}}` or the top level), else empty."""
    if not text.lstrip().startswith("{"):
        return {}
    try:
        payload = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(payload, dict):
        return {}
    error = payload.get("error")
    return error if isinstance(error, dict) else payload


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
