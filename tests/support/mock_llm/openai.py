"""OpenAI-compatible chat completions: SSE chunks with `choices[0].delta`, or one JSON body."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tests.support.mock_llm.script import Dialect, Plan, split, sse

_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def _usage(u: dict[str, int]) -> dict[str, Any]:
    total = u["prompt_tokens"] + u["completion_tokens"]
    return {
        "prompt_tokens": u["prompt_tokens"],
        "completion_tokens": u["completion_tokens"],
        "total_tokens": total,
        "prompt_tokens_details": {"cached_tokens": u["cached_tokens"]},
    }


def _tool_deltas(plan: Plan) -> Iterator[dict[str, Any]]:
    """Tool-call deltas: id/name first, then argument pieces; interleaved when parallel."""
    repeat = plan.raw.get("fault") == "repeat_ids"
    streams = []
    for n, call in enumerate(plan.calls):
        head = {"index": n, "id": call.wire_id(n), "type": "function"}
        first = {**head, "function": {"name": call.name, "arguments": ""}}
        rest = []
        for piece in split(call.arguments):
            delta: dict[str, Any] = {"index": n, "function": {"arguments": piece}}
            if repeat:
                delta = {**head, "function": {"name": call.name, "arguments": piece}}
            rest.append(delta)
        if n == 0 and plan.call_signature:  # Gemini 3: the signature on the first call
            first["extra_content"] = {"google": {"thought_signature": plan.call_signature}}
        streams.append([first, *rest])
    if plan.raw.get("parallel"):
        for step in range(max((len(s) for s in streams), default=0)):
            yield from (s[step] for s in streams if step < len(s))
    else:
        for s in streams:
            yield from s


def frames(plan: Plan, req: dict[str, Any], model: str) -> tuple[list[bytes], int]:
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    base = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = model

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body: dict[str, Any] = {**base, "choices": [choice]}
        if include_usage:
            body["usage"] = None
        return sse(body)

    field_name = plan.raw.get("reasoning_field", "reasoning_content")
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({field_name: p}) for p in plan.thought]
    out += [chunk({"content": p}) for p in plan.text]
    out += [chunk({"tool_calls": [d]}) for d in _tool_deltas(plan)]
    body_end = len(out)
    out.append(chunk({}, _FINISH.get(plan.finish, plan.finish)))
    if include_usage and plan.usage is not None:
        out.append(sse({**base, "choices": [], "usage": _usage(plan.usage)}))
    out.append(b"data: [DONE]\n\n")
    return out, body_end


def complete(plan: Plan, model: str) -> dict[str, Any]:
    text = "".join(plan.text)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if plan.thought:
        message[plan.raw.get("reasoning_field", "reasoning_content")] = "".join(plan.thought)
    if plan.calls:
        message["tool_calls"] = [
            {
                "id": c.wire_id(n),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for n, c in enumerate(plan.calls)
        ]
        if plan.call_signature:
            signed = {"google": {"thought_signature": plan.call_signature}}
            message["tool_calls"][0]["extra_content"] = signed
    finish = _FINISH.get(plan.finish, plan.finish)
    out: dict[str, Any] = {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
    }
    if plan.usage is not None:
        out["usage"] = _usage(plan.usage)
    return out


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    kind = kind or _ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def error_frame(message: str, kind: str | None) -> bytes:
    return sse(error_body(500, message, kind or "server_error"))


def overflow_body(prompt: int, n_ctx: int) -> dict[str, Any]:
    """llama.cpp's server (the OpenAI-compatible local server with the most precise error)."""
    message = "the request exceeds the available context size, try increasing it"
    error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
    return {"error": {**error, "n_prompt_tokens": prompt, "n_ctx": n_ctx}}


DIALECT = Dialect(
    "text/event-stream", False, frames, complete, error_body, error_frame, overflow_body
)
