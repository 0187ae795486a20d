"""OpenAI Responses API: SSE events named by `type` (output items, deltas, `response.completed`).

The stream of one response, as OpenAI sends it: `response.created`, `response.in_progress`, then
per output item `response.output_item.added`, its deltas (`reasoning_summary_text`,
`output_text`, `function_call_arguments`) and `response.output_item.done`; then
`response.completed` (or `response.incomplete` when cut off at `max_output_tokens`) with the
usage. No `[DONE]`. Reasoning items are those the server issued for this response
(`Plan.reasoning`, see `issue_reasoning`); their `encrypted_content` is only sent when the
request asked for it (`include: ["reasoning.encrypted_content"]`).
"""

from __future__ import annotations

import itertools
from typing import Any

from tests.support.mock_llm.script import Dialect, Plan, split

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
ENCRYPTED = "reasoning.encrypted_content"


def issue_reasoning(
    plan: Plan, model: str, issued: dict[str, dict[str, Any]], count: int
) -> list[dict[str, Any]]:
    """`count` reasoning items for this response, each noted in `issued` (id -> item, with the
    model that made it); the scripted thought becomes the first item's summary."""
    items = []
    for n in range(count):
        number = len(issued) + 1
        item_id = f"rs_mock{number}"
        summary = "".join(plan.thought) if n == 0 else ""
        item = {
            "id": item_id,
            "summary_text": summary,
            "encrypted_content": f"gAAAA-{model}-{number}",
            "model": model,
        }
        issued[item_id] = item
        items.append(item)
    return items


def _sse(data: dict[str, Any], counter: itertools.count[int]) -> bytes:
    import json

    body = {**data, "sequence_number": next(counter)}
    return f"event: {data['type']}\ndata: {json.dumps(body)}\n\n".encode()


def _reasoning_item(item: dict[str, Any], encrypted: bool) -> dict[str, Any]:
    summary = (
        [{"type": "summary_text", "text": item["summary_text"]}] if item["summary_text"] else []
    )
    out: dict[str, Any] = {"id": item["id"], "type": "reasoning", "summary": summary}
    if encrypted:
        out["encrypted_content"] = item["encrypted_content"]
    return out


def _items(plan: Plan, req: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(the finished output item, the delta events between its added and done) in order."""
    encrypted = ENCRYPTED in (req.get("include") or [])
    out = []
    for item in plan.reasoning:
        done = _reasoning_item(item, encrypted)
        deltas = []
        if item["summary_text"]:
            deltas.append({"type": "response.reasoning_summary_part.added", "summary_index": 0})
            deltas += [
                {"type": "response.reasoning_summary_text.delta", "summary_index": 0, "delta": p}
                for p in plan.thought
            ]
        out.append((done, deltas))
    if plan.text:
        text = "".join(plan.text)
        content = [{"type": "output_text", "text": text, "annotations": []}]
        message = {"id": "msg_mock", "type": "message", "status": "completed", "role": "assistant"}
        deltas = [
            {"type": "response.output_text.delta", "content_index": 0, "delta": p}
            for p in plan.text
        ]
        out.append(({**message, "content": content}, deltas))
    for n, call in enumerate(plan.calls):
        call_id = call.wire_id(n)
        done = {
            "id": f"fc_{call_id}",
            "type": "function_call",
            "status": "completed",
            "call_id": call_id,
            "name": call.name,
            "arguments": call.arguments,
        }
        deltas = [
            {"type": "response.function_call_arguments.delta", "delta": p}
            for p in split(call.arguments)
        ]
        out.append((done, deltas))
    return out


def _added(item: dict[str, Any]) -> dict[str, Any]:
    """An item as `output_item.added` shows it: nothing of its content yet."""
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    return {"id": item["id"], "type": "reasoning", "summary": []}


def _usage(u: dict[str, int] | None) -> dict[str, Any] | None:
    if u is None:
        return None
    return {
        "input_tokens": u["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": u["cached_tokens"]},
        "output_tokens": u["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
    }


def _response(plan: Plan, model: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    cut = plan.finish == "length"
    return {
        "id": "resp_mock",
        "object": "response",
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "model": model,
        "output": output,
        "usage": _usage(plan.usage),
    }


def frames(plan: Plan, req: dict[str, Any], model: str) -> tuple[list[bytes], int]:
    counter = itertools.count()
    start = {"id": "resp_mock", "object": "response", "status": "in_progress", "model": model}
    out = [
        _sse({"type": "response.created", "response": {**start, "output": []}}, counter),
        _sse({"type": "response.in_progress", "response": {**start, "output": []}}, counter),
    ]
    items = _items(plan, req)
    for index, (item, deltas) in enumerate(items):
        where = {"output_index": index}
        out.append(
            _sse({"type": "response.output_item.added", **where, "item": _added(item)}, counter)
        )
        for delta in deltas:
            out.append(_sse({**delta, **where, "item_id": item["id"]}, counter))
        out.append(_sse({"type": "response.output_item.done", **where, "item": item}, counter))
    body_end = len(out)
    response = _response(plan, model, [item for item, _ in items])
    kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    out.append(_sse({"type": kind, "response": response}, counter))
    return out, body_end


def complete(plan: Plan, model: str) -> dict[str, Any]:
    return _response(plan, model, [item for item, _ in _items(plan, {"include": [ENCRYPTED]})])


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    kind = kind or _ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def error_frame(message: str, kind: str | None) -> bytes:
    return _sse(
        {"type": "error", "code": kind or "server_error", "message": message, "param": None},
        itertools.count(),
    )


def overflow_body(prompt: int, n_ctx: int) -> dict[str, Any]:
    """OpenAI's answer to an input over the window (it gives no numbers)."""
    message = (
        "Your input exceeds the context window of this model. Please adjust your input and "
        "try again."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "input"}
    return {"error": {**error, "code": "context_length_exceeded"}}


DIALECT = Dialect(
    "text/event-stream", False, frames, complete, error_body, error_frame, overflow_body
)
