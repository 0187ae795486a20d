"""Recognize a model server's context-overflow error; read the window and prompt size out of it.

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

`parse_overflow` answers None for anything else, a `ContextOverflow` with the window and the
prompt size when the error gives them. Every HTTP backend reads its errors through it (`_http`),
so the agent loop gets the fact on `StreamError.overflow` and never parses a message meant for a
person.
"""

from __future__ import annotations

import json
import re
from typing import Any

from acp_server.messages import ContextOverflow

# Words only an overflow uses. Not "tokens exceed": "max_tokens exceeds the model's limit" is
# about the reply, and compacting the conversation would not help it.
_MARKERS = re.compile(
    r"context[ _-]?(length|window|size)|too many tokens|maximum context|prompt is too long"
    r"|exceeds? (the )?(available |maximum )?context|exceed_context_size"
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


def parse_overflow(text: str, payload: Any = None) -> ContextOverflow | None:
    """The overflow an error describes; None if it is not one. `text` is the error's message or
    its raw body; `payload` the body already parsed (else read from `text` when it is JSON)."""
    fields = _error_fields(payload if payload is not None else _loads(text))
    kind = f"{fields.get('type') or ''} {fields.get('code') or ''}"
    window = _int(fields.get("n_ctx")) or _first(_WINDOW, text)
    prompt = _int(fields.get("n_prompt_tokens")) or _first(_PROMPT, text)
    if window is None and prompt is None and not _MARKERS.search(f"{kind} {text}"):
        return None
    return ContextOverflow(window, prompt)


def _first(patterns: list[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def _loads(text: str) -> Any:
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _error_fields(payload: Any) -> dict[str, Any]:
    """The error object of a JSON body (`{"error": {...}}` or the top level), else empty."""
    if not isinstance(payload, dict):
        return {}
    error = payload.get("error")
    return error if isinstance(error, dict) else payload


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
