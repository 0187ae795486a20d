"""The dialect-neutral core: a scripted response split into the pieces every dialect streams,
and the shape of a dialect (how a planned response streams, completes and fails)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Response = dict[str, Any]
NO_SCRIPT_TEXT = "mock: no scripted response"
ERROR_FRAME_TEXT = "mock: the model is overloaded"


@dataclass
class Call:
    id: str | None
    name: str
    arguments: str  # the JSON text as the model "wrote" it
    value: Any  # parsed arguments (the raw string when it is not valid JSON)

    def wire_id(self, n: int, prefix: str = "call_mock") -> str:
        """The scripted id, or a made-up one (`call_mockN`, Anthropic's `toolu_mockN`)."""
        return self.id or f"{prefix}{n}"


@dataclass
class Plan:
    """A scripted response, split into the pieces every dialect streams."""

    thought: list[str]
    text: list[str]
    calls: list[Call]
    finish: str
    usage: dict[str, int] | None
    signature: str
    raw: Response = field(repr=False)
    # Responses API: the reasoning items to stream (set by the server, which issues them).
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    # Gemini's OpenAI-compatible API: the thought signature on the reply's first tool call.
    call_signature: str | None = None


@dataclass(frozen=True)
class Dialect:
    """One wire dialect. `frames` returns the stream's frames and how many of them carry the
    reply's content (faults cut or stall inside those); the rest end the stream."""

    stream_type: str
    streams_by_default: bool
    frames: Callable[[Plan, dict[str, Any], str], tuple[list[bytes], int]]
    complete: Callable[[Plan, str], dict[str, Any]]
    error_body: Callable[[int, str, str | None], Any]
    error_frame: Callable[[str, str | None], bytes]
    # The HTTP 400 body refusing a prompt of `prompt` tokens for a window of `n_ctx` tokens.
    overflow_body: Callable[[int, int], Any]


def make_plan(resp: Response, prompt_tokens: int) -> Plan:
    """`prompt_tokens`: the request's prompt as counted by the server (the default usage)."""
    words = int(resp.get("chunk_words", 1))
    calls = []
    for call in resp.get("tool_calls") or []:
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                value = json.loads(args)
            except ValueError:
                value = args
            calls.append(Call(call.get("id"), call["name"], args, value))
        else:
            calls.append(Call(call.get("id"), call["name"], json.dumps(args), args))
    text = _pieces(resp.get("text", ""), words)
    if resp.get("fault") == "inline_tool_call":
        text += _inline_markup(resp, calls)
        calls = []
    finish = resp.get("finish") or ("tool_calls" if calls else "stop")
    return Plan(
        thought=_pieces(resp.get("thought", ""), words),
        text=text,
        calls=calls,
        finish=finish,
        usage=_usage(resp, prompt_tokens),
        signature=resp.get("signature", "sig-1"),
        raw=resp,
    )


def split(text: str, parts: int = 3) -> list[str]:
    """Split a string into up to `parts` non-empty pieces (tool arguments arrive in pieces)."""
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def ndjson(data: Any) -> bytes:
    return (json.dumps(data) + "\n").encode()


def _pieces(text: str, words: int) -> list[str]:
    """Split text into deltas of `words` words each, whitespace kept with the next word."""
    tokens = re.findall(r"\s*\S+|\s+$", text)
    size = max(1, words)
    return ["".join(tokens[i : i + size]) for i in range(0, len(tokens), size)]


def _inline_markup(resp: Response, calls: list[Call]) -> list[str]:
    """`<tool_call>{json}</tool_call>` written as text, cut so the tags straddle deltas."""
    if not calls:
        calls = [Call(None, resp.get("name", "read_file"), "", resp.get("arguments", {}))]
    markup = "".join(
        "<tool_call>" + json.dumps({"name": c.name, "arguments": c.value}) + "</tool_call>"
        for c in calls
    )
    size = int(resp.get("piece_chars", 5))
    return [markup[i : i + size] for i in range(0, len(markup), size)]


def _usage(resp: Response, prompt_tokens: int) -> dict[str, int] | None:
    if "usage" in resp and resp["usage"] is None:
        return None
    given = dict(resp.get("usage") or {})
    output = len(resp.get("text", "")) + len(resp.get("thought", ""))
    return {
        "prompt_tokens": int(given.get("prompt_tokens", max(1, prompt_tokens))),
        "completion_tokens": int(given.get("completion_tokens", max(1, output // 4))),
        "cached_tokens": int(given.get("cached_tokens", 0)),
        "cache_creation_tokens": int(given.get("cache_creation_tokens", 0)),
    }
