"""Ollama native `/api/chat`: NDJSON lines with `message`, a final `done: true` object."""

from __future__ import annotations

from typing import Any

from tests.support.mock_llm.script import Dialect, Plan, ndjson

# Ollama has no tool or refusal stop reason: a reply with tool calls ends with "stop".
_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "stop",
    "content_filter": "stop",
}


def _calls(plan: Plan) -> list[dict[str, Any]]:
    """Tool calls carry no id unless the script asks for `ollama_ids` (older Ollama sends none)."""
    out = []
    for n, c in enumerate(plan.calls):
        call: dict[str, Any] = {"function": {"index": n, "name": c.name, "arguments": c.value}}
        if plan.raw.get("ollama_ids"):
            call["id"] = c.wire_id(n)
        out.append(call)
    return out


def _final(plan: Plan, model: str, message: dict[str, Any]) -> dict[str, Any]:
    done = {
        "model": model,
        "created_at": "2025-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": _FINISH.get(plan.finish, plan.finish),
        "total_duration": 1_000_000,
        "load_duration": 1_000,
    }
    if plan.usage is not None:
        done["prompt_eval_count"] = plan.usage["prompt_tokens"]
        done["eval_count"] = plan.usage["completion_tokens"]
    return done


def frames(plan: Plan, req: dict[str, Any], model: str) -> tuple[list[bytes], int]:
    def line(**message: Any) -> bytes:
        msg = {"role": "assistant", "content": "", **message}
        return ndjson(
            {"model": model, "created_at": "2025-01-01T00:00:00Z", "message": msg, "done": False}
        )

    out = [line(thinking=p) for p in plan.thought]
    out += [line(content=p) for p in plan.text]
    if plan.calls:
        out.append(line(tool_calls=_calls(plan)))
    body_end = len(out)
    out.append(ndjson(_final(plan, model, {"role": "assistant", "content": ""})))
    return out, body_end


def complete(plan: Plan, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(plan.text)}
    if plan.thought:
        message["thinking"] = "".join(plan.thought)
    if plan.calls:
        message["tool_calls"] = _calls(plan)
    return _final(plan, model, message)


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    return {"error": message}


def error_frame(message: str, kind: str | None) -> bytes:
    return ndjson({"error": message})


def overflow_body(prompt: int, n_ctx: int) -> dict[str, Any]:
    """Newer Ollama refuses instead of cutting the prompt when truncation is off; by default it
    cuts silently (the mock's `cap_prompt_tokens` plays that)."""
    return error_body(400, "the input length exceeds the context length")


# Ollama streams unless the request says `"stream": false`, as the real server does.
DIALECT = Dialect(
    "application/x-ndjson", True, frames, complete, error_body, error_frame, overflow_body
)
