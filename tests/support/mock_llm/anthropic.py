"""Anthropic Messages: SSE events (message_start, content blocks, message_delta), or one body."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.support.mock_llm.script import Dialect, Plan, split, sse

_FINISH = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_ID_PREFIX = "toolu_mock"


def _usage(u: dict[str, int] | None) -> dict[str, int]:
    """Anthropic's input_tokens excludes cache reads and writes; prompt_tokens is the total."""
    u = u or {"prompt_tokens": 0, "cached_tokens": 0, "cache_creation_tokens": 0}
    fresh = u["prompt_tokens"] - u["cached_tokens"] - u["cache_creation_tokens"]
    return {
        "input_tokens": max(0, fresh),
        "cache_creation_input_tokens": u["cache_creation_tokens"],
        "cache_read_input_tokens": u["cached_tokens"],
        "output_tokens": 1,
    }


def _blocks(plan: Plan) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(content_block_start block, its deltas) in message order."""
    if plan.thought:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in plan.thought]
        deltas.append({"type": "signature_delta", "signature": plan.signature})
        yield {"type": "thinking", "thinking": "", "signature": ""}, deltas
    if plan.text:
        yield {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in plan.text]
    for n, c in enumerate(plan.calls):
        block = {"type": "tool_use", "id": c.wire_id(n, _ID_PREFIX), "name": c.name}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in split(c.arguments)]
        yield {**block, "input": {}}, deltas


def frames(plan: Plan, req: dict[str, Any], model: str) -> tuple[list[bytes], int]:
    message: dict[str, Any] = {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(plan.usage),
    }
    out = [sse({"type": "message_start", "message": message}, "message_start")]
    out.append(sse({"type": "ping"}, "ping"))
    for index, (block, deltas) in enumerate(_blocks(plan)):
        start = {"type": "content_block_start", "index": index, "content_block": block}
        out.append(sse(start, "content_block_start"))
        for d in deltas:
            delta = {"type": "content_block_delta", "index": index, "delta": d}
            out.append(sse(delta, "content_block_delta"))
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    body_end = len(out)
    output = plan.usage["completion_tokens"] if plan.usage else 0
    delta = {"stop_reason": _FINISH.get(plan.finish, plan.finish), "stop_sequence": None}
    end = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": output}}
    out.append(sse(end, "message_delta"))
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out, body_end


def complete(plan: Plan, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if plan.thought:
        content.append(
            {"type": "thinking", "thinking": "".join(plan.thought), "signature": plan.signature}
        )
    if plan.text:
        content.append({"type": "text", "text": "".join(plan.text)})
    for n, c in enumerate(plan.calls):
        content.append(
            {"type": "tool_use", "id": c.wire_id(n, _ID_PREFIX), "name": c.name, "input": c.value}
        )
    usage = _usage(plan.usage)
    usage["output_tokens"] = plan.usage["completion_tokens"] if plan.usage else 0
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _FINISH.get(plan.finish, plan.finish),
        "stop_sequence": None,
        "usage": usage,
    }


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    kind = kind or _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_frame(message: str, kind: str | None) -> bytes:
    return sse(error_body(529, message, kind or "overloaded_error"), "error")


def overflow_body(prompt: int, n_ctx: int) -> dict[str, Any]:
    return error_body(400, f"prompt is too long: {prompt} tokens > {n_ctx} maximum")


DIALECT = Dialect(
    "text/event-stream", False, frames, complete, error_body, error_frame, overflow_body
)
