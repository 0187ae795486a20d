"""A real HTTP/1.1 mock LLM server for tests: three wire dialects, scripted replies, faults.

Why a socket server and not `httpx.MockTransport`: the agent under test may be a separate
`acp-server` process, and transport faults (a cut connection, a stalled stream, a slow first
byte) only exist on a real socket. Stdlib asyncio only; one request per connection
(`Connection: close`); streams are chunked unless a response says `"chunked": False`.

Endpoints: `POST /v1/chat/completions` (OpenAI SSE), `POST /v1/messages` (Anthropic SSE),
`POST /api/chat` (Ollama NDJSON), and discovery: `GET /v1/models`, `GET /props` (llama.cpp),
`POST /api/show` (Ollama). Every request is recorded in `MockLLM.requests`.

A scripted response is a dialect-neutral dict; the endpoint that receives it picks the wire:

    text, thought, reasoning_field ("reasoning_content" | "reasoning"), signature,
    tool_calls [{id, name, arguments: dict | raw str}], parallel, ollama_ids,
    finish ("stop" | "length" | "tool_calls" | "content_filter"),
    usage {prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens} | None,
    chunk_words, delay_ms, chunked, headers (extra response headers, e.g. one echoing a key),
    fault: status | html | cut | error_frame | slow_first_byte | stall | empty_stream |
           repeat_ids | reject_null_content | reject_stream_options | inline_tool_call
    fault parameters: status, retry_after, body, after (frames sent before a cut, a stall
           or an error frame), seconds, message, error_type, name + arguments, piece_chars.

Defaults worth knowing: `finish` is "tool_calls" when there are tool calls, else "stop";
`usage` defaults to prompt_tokens = request bytes / 4 (errs high) and is omitted entirely
with `"usage": None`; `prompt_tokens` is the whole prompt (OpenAI meaning), so Anthropic gets
input_tokens = prompt - cached - cache_creation. `after` defaults to half the content frames
(0 for error_frame). Tool ids default to call_mockN / toolu_mockN; Ollama tool calls carry no
id unless `ollama_ids` (older Ollama sends none). `stream` defaults to false for OpenAI and
Anthropic and to true for Ollama, as the real servers do. `reject_stream_options` stays
queued when it rejects; `reject_null_content` is consumed either way. An empty queue answers
NO_SCRIPT_TEXT with finish "stop". Discovery: `set(context_length=N)` feeds /v1/models
`context_length`, /props `default_generation_settings.n_ctx`, /api/show
`model_info["<arch>.context_length"]` and `parameters` num_ctx; `n_ctx`, `num_ctx`,
`n_ctx_train` (llama.cpp's /v1/models `meta`), `arch` and `model` override. /props answers
404 while no window is known (a server that is not llama.cpp).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

Response = dict[str, Any]
NO_SCRIPT_TEXT = "mock: no scripted response"
ERROR_FRAME_TEXT = "mock: the model is overloaded"
CHAT_PATHS = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/api/chat": "ollama",
}
_OPENAI_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}
_ANTHROPIC_FINISH = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
# Ollama has no tool or refusal stop reason: a reply with tool calls ends with "stop".
_OLLAMA_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "stop",
    "content_filter": "stop",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_HTML_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>{status} gateway trouble</title></head>\n"
    "<body><h1>{status}</h1><p>The upstream model server did not answer.</p>"
    "<hr><address>mock-proxy</address></body></html>\n"
)


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    body: bytes = b""
    query: str = ""


@dataclass
class _Call:
    id: str | None
    name: str
    arguments: str  # the JSON text as the model "wrote" it
    value: Any  # parsed arguments (the raw string when it is not valid JSON)


@dataclass
class _Plan:
    """A scripted response, split into the pieces every dialect streams."""

    thought: list[str]
    text: list[str]
    calls: list[_Call]
    finish: str
    usage: dict[str, int] | None
    signature: str
    raw: Response = field(repr=False)


def _pieces(text: str, words: int) -> list[str]:
    """Split text into deltas of `words` words each, whitespace kept with the next word."""
    tokens = re.findall(r"\s*\S+|\s+$", text)
    size = max(1, words)
    return ["".join(tokens[i : i + size]) for i in range(0, len(tokens), size)]


def _split(text: str, parts: int = 3) -> list[str]:
    """Split a string into up to `parts` non-empty pieces (tool arguments arrive in pieces)."""
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _plan(resp: Response, request_body: bytes) -> _Plan:
    words = int(resp.get("chunk_words", 1))
    calls = []
    for call in resp.get("tool_calls") or []:
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                value = json.loads(args)
            except ValueError:
                value = args
            calls.append(_Call(call.get("id"), call["name"], args, value))
        else:
            calls.append(_Call(call.get("id"), call["name"], json.dumps(args), args))
    text = _pieces(resp.get("text", ""), words)
    if resp.get("fault") == "inline_tool_call":
        text += _inline_markup(resp, calls)
        calls = []
    finish = resp.get("finish") or ("tool_calls" if calls else "stop")
    return _Plan(
        thought=_pieces(resp.get("thought", ""), words),
        text=text,
        calls=calls,
        finish=finish,
        usage=_usage(resp, request_body),
        signature=resp.get("signature", "sig-1"),
        raw=resp,
    )


def _inline_markup(resp: Response, calls: list[_Call]) -> list[str]:
    """`<tool_call>{json}</tool_call>` written as text, cut so the tags straddle deltas."""
    if not calls:
        calls = [_Call(None, resp.get("name", "read_file"), "", resp.get("arguments", {}))]
    markup = "".join(
        "<tool_call>" + json.dumps({"name": c.name, "arguments": c.value}) + "</tool_call>"
        for c in calls
    )
    size = int(resp.get("piece_chars", 5))
    return [markup[i : i + size] for i in range(0, len(markup), size)]


def _usage(resp: Response, request_body: bytes) -> dict[str, int] | None:
    if "usage" in resp and resp["usage"] is None:
        return None
    given = dict(resp.get("usage") or {})
    # Default prompt count errs high (raw JSON bytes / 4) so truncation guards stay quiet.
    output = len(resp.get("text", "")) + len(resp.get("thought", ""))
    return {
        "prompt_tokens": int(given.get("prompt_tokens", max(1, len(request_body) // 4))),
        "completion_tokens": int(given.get("completion_tokens", max(1, output // 4))),
        "cached_tokens": int(given.get("cached_tokens", 0)),
        "cache_creation_tokens": int(given.get("cache_creation_tokens", 0)),
    }


def _call_id(call: _Call, n: int, dialect: str) -> str:
    if call.id:
        return call.id
    return f"toolu_mock{n}" if dialect == "anthropic" else f"call_mock{n}"


# --- OpenAI-compatible ------------------------------------------------------------------


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _openai_usage(u: dict[str, int]) -> dict[str, Any]:
    total = u["prompt_tokens"] + u["completion_tokens"]
    return {
        "prompt_tokens": u["prompt_tokens"],
        "completion_tokens": u["completion_tokens"],
        "total_tokens": total,
        "prompt_tokens_details": {"cached_tokens": u["cached_tokens"]},
    }


def _openai_tool_deltas(plan: _Plan) -> Iterator[dict[str, Any]]:
    """Tool-call deltas: id/name first, then argument pieces; interleaved when parallel."""
    repeat = plan.raw.get("fault") == "repeat_ids"
    streams = []
    for n, call in enumerate(plan.calls):
        head = {"index": n, "id": _call_id(call, n, "openai"), "type": "function"}
        first = {**head, "function": {"name": call.name, "arguments": ""}}
        rest = []
        for piece in _split(call.arguments):
            delta: dict[str, Any] = {"index": n, "function": {"arguments": piece}}
            if repeat:
                delta = {**head, "function": {"name": call.name, "arguments": piece}}
            rest.append(delta)
        streams.append([first, *rest])
    if plan.raw.get("parallel"):
        for step in range(max((len(s) for s in streams), default=0)):
            yield from (s[step] for s in streams if step < len(s))
    else:
        for s in streams:
            yield from s


def _openai_frames(plan: _Plan, req: dict[str, Any], model: str) -> tuple[list[bytes], int]:
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    base = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = model

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body: dict[str, Any] = {**base, "choices": [choice]}
        if include_usage:
            body["usage"] = None
        return _sse(body)

    field_name = plan.raw.get("reasoning_field", "reasoning_content")
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({field_name: p}) for p in plan.thought]
    frames += [chunk({"content": p}) for p in plan.text]
    frames += [chunk({"tool_calls": [d]}) for d in _openai_tool_deltas(plan)]
    body_end = len(frames)
    frames.append(chunk({}, _OPENAI_FINISH.get(plan.finish, plan.finish)))
    if include_usage and plan.usage is not None:
        frames.append(_sse({**base, "choices": [], "usage": _openai_usage(plan.usage)}))
    frames.append(b"data: [DONE]\n\n")
    return frames, body_end


def _openai_complete(plan: _Plan, model: str) -> dict[str, Any]:
    text = "".join(plan.text)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if plan.thought:
        message[plan.raw.get("reasoning_field", "reasoning_content")] = "".join(plan.thought)
    if plan.calls:
        message["tool_calls"] = [
            {
                "id": _call_id(c, n, "openai"),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for n, c in enumerate(plan.calls)
        ]
    finish = _OPENAI_FINISH.get(plan.finish, plan.finish)
    out: dict[str, Any] = {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
    }
    if plan.usage is not None:
        out["usage"] = _openai_usage(plan.usage)
    return out


# --- Anthropic Messages -----------------------------------------------------------------


def _anthropic_usage(u: dict[str, int] | None) -> dict[str, int]:
    """Anthropic's input_tokens excludes cache reads and writes; prompt_tokens is the total."""
    u = u or {"prompt_tokens": 0, "cached_tokens": 0, "cache_creation_tokens": 0}
    fresh = u["prompt_tokens"] - u["cached_tokens"] - u["cache_creation_tokens"]
    return {
        "input_tokens": max(0, fresh),
        "cache_creation_input_tokens": u["cache_creation_tokens"],
        "cache_read_input_tokens": u["cached_tokens"],
        "output_tokens": 1,
    }


def _anthropic_blocks(plan: _Plan) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(content_block_start block, its deltas) in message order."""
    if plan.thought:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in plan.thought]
        deltas.append({"type": "signature_delta", "signature": plan.signature})
        yield {"type": "thinking", "thinking": "", "signature": ""}, deltas
    if plan.text:
        yield {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in plan.text]
    for n, c in enumerate(plan.calls):
        block = {"type": "tool_use", "id": _call_id(c, n, "anthropic"), "name": c.name}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _split(c.arguments)]
        yield {**block, "input": {}}, deltas


def _anthropic_frames(plan: _Plan, model: str) -> tuple[list[bytes], int]:
    message: dict[str, Any] = {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _anthropic_usage(plan.usage),
    }
    frames = [_sse({"type": "message_start", "message": message}, "message_start")]
    frames.append(_sse({"type": "ping"}, "ping"))
    for index, (block, deltas) in enumerate(_anthropic_blocks(plan)):
        start = {"type": "content_block_start", "index": index, "content_block": block}
        frames.append(_sse(start, "content_block_start"))
        for d in deltas:
            frames.append(
                _sse(
                    {"type": "content_block_delta", "index": index, "delta": d},
                    "content_block_delta",
                )
            )
        frames.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    body_end = len(frames)
    output = plan.usage["completion_tokens"] if plan.usage else 0
    delta = {"stop_reason": _ANTHROPIC_FINISH.get(plan.finish, plan.finish), "stop_sequence": None}
    end = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": output}}
    frames.append(_sse(end, "message_delta"))
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return frames, body_end


def _anthropic_complete(plan: _Plan, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if plan.thought:
        content.append(
            {"type": "thinking", "thinking": "".join(plan.thought), "signature": plan.signature}
        )
    if plan.text:
        content.append({"type": "text", "text": "".join(plan.text)})
    for n, c in enumerate(plan.calls):
        content.append(
            {
                "type": "tool_use",
                "id": _call_id(c, n, "anthropic"),
                "name": c.name,
                "input": c.value,
            }
        )
    usage = _anthropic_usage(plan.usage)
    usage["output_tokens"] = plan.usage["completion_tokens"] if plan.usage else 0
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _ANTHROPIC_FINISH.get(plan.finish, plan.finish),
        "stop_sequence": None,
        "usage": usage,
    }


# --- Ollama native ----------------------------------------------------------------------


def _ollama_calls(plan: _Plan) -> list[dict[str, Any]]:
    out = []
    for n, c in enumerate(plan.calls):
        call: dict[str, Any] = {"function": {"index": n, "name": c.name, "arguments": c.value}}
        if plan.raw.get("ollama_ids"):
            call["id"] = _call_id(c, n, "openai")
        out.append(call)
    return out


def _ollama_final(plan: _Plan, model: str, message: dict[str, Any]) -> dict[str, Any]:
    done = {
        "model": model,
        "created_at": "2025-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": _OLLAMA_FINISH.get(plan.finish, plan.finish),
        "total_duration": 1_000_000,
        "load_duration": 1_000,
    }
    if plan.usage is not None:
        done["prompt_eval_count"] = plan.usage["prompt_tokens"]
        done["eval_count"] = plan.usage["completion_tokens"]
    return done


def _ndjson(data: Any) -> bytes:
    return (json.dumps(data) + "\n").encode()


def _ollama_frames(plan: _Plan, model: str) -> tuple[list[bytes], int]:
    def line(**message: Any) -> bytes:
        msg = {"role": "assistant", "content": "", **message}
        return _ndjson(
            {"model": model, "created_at": "2025-01-01T00:00:00Z", "message": msg, "done": False}
        )

    frames = [line(thinking=p) for p in plan.thought]
    frames += [line(content=p) for p in plan.text]
    if plan.calls:
        frames.append(line(tool_calls=_ollama_calls(plan)))
    body_end = len(frames)
    frames.append(_ndjson(_ollama_final(plan, model, {"role": "assistant", "content": ""})))
    return frames, body_end


def _ollama_complete(plan: _Plan, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(plan.text)}
    if plan.thought:
        message["thinking"] = "".join(plan.thought)
    if plan.calls:
        message["tool_calls"] = _ollama_calls(plan)
    return _ollama_final(plan, model, message)


# --- errors -----------------------------------------------------------------------------


def _error_body(dialect: str, status: int, message: str, kind: str | None = None) -> Any:
    if dialect == "ollama":
        return {"error": message}
    if dialect == "anthropic":
        kind = kind or _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = kind or _OPENAI_ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _error_frame(dialect: str, resp: Response) -> bytes:
    message = resp.get("message", ERROR_FRAME_TEXT)
    kind = resp.get("error_type")
    if dialect == "ollama":
        return _ndjson({"error": message})
    if dialect == "anthropic":
        body = _error_body("anthropic", 529, message, kind or "overloaded_error")
        return _sse(body, "error")
    return _sse(_error_body("openai", 500, message, kind or "server_error"))


# --- HTTP -------------------------------------------------------------------------------


class _Out:
    """Writes one HTTP/1.1 response; every body write is flushed at once."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.chunked = False
        self.extra: dict[str, str] = {}  # headers every response of this exchange carries

    async def head(
        self,
        status: int,
        content_type: str,
        length: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Overloaded" if status == 529 else "Unknown"
        lines = [f"HTTP/1.1 {status} {phrase}", f"Content-Type: {content_type}"]
        lines.append("Connection: close")
        if length is not None:
            lines.append(f"Content-Length: {length}")
        elif self.chunked:
            lines.append("Transfer-Encoding: chunked")
        extra = {**self.extra, **(headers or {})}
        lines += [f"{name}: {value}" for name, value in extra.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await self.writer.drain()

    async def send(self, data: bytes) -> None:
        if self.chunked:
            data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        self.writer.write(data)
        await self.writer.drain()

    async def end(self) -> None:
        if self.chunked:
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()

    async def whole(
        self,
        status: int,
        body: Any,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """A complete response: JSON for dicts and lists, text/plain for strings by default."""
        if isinstance(body, str | bytes):
            data = body.encode() if isinstance(body, str) else body
            kind = content_type or "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(body).encode(), content_type or "application/json"
        await self.head(status, kind, len(data), headers)
        self.writer.write(data)
        await self.writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> Recorded | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while size := int((await reader.readline()).split(b";")[0], 16):
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
    else:
        body = b""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    path, _, query = target.partition("?")
    return Recorded(method.upper(), path, headers, parsed, body, query)


# --- the server -------------------------------------------------------------------------


class MockLLM:
    """A scripted LLM endpoint on 127.0.0.1 speaking OpenAI, Anthropic and Ollama wire."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[Recorded] = []
        self.info: dict[str, Any] = {"model": "mock-model"}
        self._script: deque[Response] = deque()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def queue(self, *responses: Response) -> None:
        """Append responses, served in order to the chat endpoints of any dialect."""
        self._script.extend(responses)

    def set(self, **info: Any) -> None:
        """Discovery data: model, context_length; overrides n_ctx, num_ctx, n_ctx_train, arch."""
        self.info.update(info)

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        return len(self._script)

    @property
    def chat_requests(self) -> list[Recorded]:
        """The recorded requests that went to a chat endpoint."""
        return [r for r in self.requests if r.path in CHAT_PATHS]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        """Stop listening, cut every open connection and wait for the handlers to finish."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> MockLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            request = await _read_request(reader)
            if request is not None:
                self.requests.append(request)
                await self._route(request, _Out(writer))
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the client hung up or sent garbage: nothing left to answer
        except asyncio.CancelledError:
            # close() cancels open connections. Ending normally matters on 3.11: asyncio's
            # done-callback calls task.exception(), which raises for a cancelled task.
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _route(self, req: Recorded, out: _Out) -> None:
        if req.method == "POST" and req.path in CHAT_PATHS:
            await self._chat(CHAT_PATHS[req.path], req, out)
        elif req.method == "GET" and req.path in ("/v1/models", "/models"):
            await out.whole(200, self._models())
        elif req.method == "GET" and req.path == "/props" and self._n_ctx() is not None:
            await out.whole(200, self._props())
        elif req.method == "POST" and req.path == "/api/show":
            await out.whole(200, self._show())
        else:
            message = f"mock: no route for {req.method} {req.path}"
            await out.whole(
                404, {"error": {"code": 404, "message": message, "type": "not_found_error"}}
            )

    # discovery ------------------------------------------------------------------------

    def _pick(self, key: str) -> Any:
        return self.info[key] if key in self.info else self.info.get("context_length")

    def _n_ctx(self) -> Any:
        return self._pick("n_ctx")

    def _models(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": self.info["model"], "object": "model", "created": 0}
        entry["owned_by"] = "mock"
        if self.info.get("context_length") is not None:
            entry["context_length"] = self.info["context_length"]
        if self.info.get("n_ctx_train") is not None:
            entry["meta"] = {"n_ctx_train": self.info["n_ctx_train"]}
        return {"object": "list", "data": [entry]}

    def _props(self) -> dict[str, Any]:
        """llama.cpp's /props: the runtime window is default_generation_settings.n_ctx."""
        settings = {"id": 0, "id_task": -1, "n_ctx": self._n_ctx(), "speculative": False}
        settings |= {"is_processing": False, "params": {"n_predict": -1, "temperature": 0.8}}
        return {
            "default_generation_settings": settings,
            "total_slots": 1,
            "model_path": f"/models/{self.info['model']}.gguf",
            "chat_template": "",
            "chat_template_caps": {},
            "modalities": {"vision": False, "audio": False},
            "build_info": "mock",
            "is_sleeping": False,
        }

    def _show(self) -> dict[str, Any]:
        """Ollama's /api/show: model_info has the trained length, parameters the num_ctx."""
        arch = self.info.get("arch", "llama")
        model_info: dict[str, Any] = {"general.architecture": arch}
        model_info["general.parameter_count"] = 8_030_261_248
        if self.info.get("context_length") is not None:
            model_info[f"{arch}.context_length"] = self.info["context_length"]
        details = {"parent_model": "", "format": "gguf", "family": arch, "families": [arch]}
        details |= {"parameter_size": "8.0B", "quantization_level": "Q4_K_M"}
        show: dict[str, Any] = {
            "modelfile": f"# Modelfile generated by mock\nFROM {self.info['model']}\n",
            "template": "{{ .Prompt }}",
            "details": details,
            "model_info": model_info,
            "capabilities": ["completion", "tools", "thinking"],
            "modified_at": "2025-01-01T00:00:00Z",
        }
        num_ctx = self._pick("num_ctx")
        if num_ctx is not None:
            show["parameters"] = f"{'num_ctx':<30} {num_ctx}"  # Ollama pads keys to 30
            show["modelfile"] += f"PARAMETER num_ctx {num_ctx}\n"
        return show

    # chat -----------------------------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> Response | None:
        """The response to serve; None means "rejected without consuming it"."""
        if not self._script:
            return {"text": NO_SCRIPT_TEXT, "finish": "stop"}
        resp = self._script[0]
        if resp.get("fault") == "reject_stream_options" and "stream_options" in body:
            return None
        return self._script.popleft()

    async def _chat(self, dialect: str, req: Recorded, out: _Out) -> None:
        body = req.json if isinstance(req.json, dict) else {}
        resp = self._next(body)
        if resp is None:
            message = "Unrecognized request argument supplied: stream_options"
            await out.whole(400, _error_body(dialect, 400, message))
            return
        out.extra = dict(resp.get("headers") or {})
        fault = resp.get("fault")
        if fault == "reject_null_content" and any(
            isinstance(m, dict) and "content" in m and m["content"] is None
            for m in body.get("messages") or []
        ):
            await out.whole(400, _error_body(dialect, 400, "content must be a string"))
            return
        if fault in ("status", "html"):
            await self._status_fault(dialect, resp, out)
            return
        if fault == "slow_first_byte":
            await asyncio.sleep(float(resp.get("seconds", 1.0)))
        plan = _plan(resp, req.body)
        model = str(body.get("model") or self.info["model"])
        if body.get("stream", dialect == "ollama"):
            await self._stream(dialect, plan, body, model, out)
        else:
            await self._complete(dialect, plan, model, out)

    async def _status_fault(self, dialect: str, resp: Response, out: _Out) -> None:
        extra: dict[str, str] = {}
        if resp.get("retry_after") is not None:
            extra["Retry-After"] = str(resp["retry_after"])
        if resp.get("fault") == "html":
            status = int(resp.get("status", 502))
            page = _HTML_PAGE.format(status=status)
            await out.whole(status, page, "text/html; charset=utf-8", extra)
            return
        status = int(resp.get("status", 500))
        message = resp.get("message", f"mock: HTTP {status}")
        body = resp.get("body", _error_body(dialect, status, message, resp.get("error_type")))
        await out.whole(status, body, headers=extra)

    async def _complete(self, dialect: str, plan: _Plan, model: str, out: _Out) -> None:
        fault = plan.raw.get("fault")
        if fault == "error_frame":
            message = plan.raw.get("message", ERROR_FRAME_TEXT)
            await out.whole(200, _error_body(dialect, 500, message))
            return
        if fault == "empty_stream":
            await out.whole(200, b"", "application/json")
            return
        if dialect == "anthropic":
            data = json.dumps(_anthropic_complete(plan, model)).encode()
        elif dialect == "ollama":
            data = json.dumps(_ollama_complete(plan, model)).encode()
        else:
            data = json.dumps(_openai_complete(plan, model)).encode()
        if fault == "stall":
            await asyncio.sleep(float(plan.raw.get("seconds", 1.0)))
        await out.head(200, "application/json", length=len(data))
        if fault == "cut":  # promise the whole body, deliver half, hang up
            data = data[: len(data) // 2]
        await out.send(data)

    async def _stream(
        self, dialect: str, plan: _Plan, req: dict[str, Any], model: str, out: _Out
    ) -> None:
        if dialect == "anthropic":
            frames, body_end = _anthropic_frames(plan, model)
        elif dialect == "ollama":
            frames, body_end = _ollama_frames(plan, model)
        else:
            frames, body_end = _openai_frames(plan, req, model)
        resp = plan.raw
        fault = resp.get("fault")
        after = int(resp.get("after", max(1, body_end // 2)))
        if fault == "empty_stream":
            frames = []
        elif fault == "cut":
            frames = frames[: min(after, body_end)]
        elif fault == "error_frame":
            frames = [
                *frames[: min(int(resp.get("after", 0)), body_end)],
                _error_frame(dialect, resp),
            ]
        out.chunked = resp.get("chunked", True)
        kind = "application/x-ndjson" if dialect == "ollama" else "text/event-stream"
        await out.head(200, kind, headers={"Cache-Control": "no-cache"})
        delay = float(resp.get("delay_ms", 0)) / 1000
        for i, frame in enumerate(frames):
            if fault == "stall" and i == after:
                await asyncio.sleep(float(resp.get("seconds", 1.0)))
            elif i and delay:
                await asyncio.sleep(delay)
            await out.send(frame)
        if fault != "cut":
            await out.end()


@contextlib.asynccontextmanager
async def running_mock_llm() -> AsyncIterator[MockLLM]:
    """Start a MockLLM for the duration of the block."""
    server = MockLLM()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def mock_llm() -> AsyncIterator[MockLLM]:
    """A running MockLLM, closed after the test."""
    async with running_mock_llm() as server:
        yield server
