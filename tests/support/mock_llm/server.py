"""The mock server: routing, discovery endpoints, the script queue, the faults, and the limits
of a small local server (a window, a silent cut, a strict validator)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.mock_llm import anthropic, discovery, ollama, openai, responses, strict
from tests.support.mock_llm.http_io import Recorded, ResponseWriter, read_request
from tests.support.mock_llm.script import (
    ERROR_FRAME_TEXT,
    NO_SCRIPT_TEXT,
    Dialect,
    Plan,
    Response,
    make_plan,
)
from tests.support.mock_llm.view import conversation, count_tokens, tool_problem
from tests.support.strict_openai_models import refusal

Responder = Callable[[dict[str, Any]], Response]

CHAT_PATHS: dict[str, Dialect] = {
    "/v1/chat/completions": openai.DIALECT,
    "/chat/completions": openai.DIALECT,
    "/v1/messages": anthropic.DIALECT,
    "/api/chat": ollama.DIALECT,
    "/v1/responses": responses.DIALECT,
    "/responses": responses.DIALECT,
}
_HTML_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>{status} gateway trouble</title></head>\n"
    "<body><h1>{status}</h1><p>The upstream model server did not answer.</p>"
    "<hr><address>mock-proxy</address></body></html>\n"
)


class MockLLM:
    """A scripted LLM endpoint on 127.0.0.1 speaking OpenAI, Anthropic and Ollama wire.

    The options (also settable as attributes while it runs) make it a small local server:
    `window` refuses a prompt over that many tokens (counted by `view.count_tokens`) with the
    dialect's overflow error; `report_window` tells that window on the discovery endpoints;
    `cap_prompt_tokens` reports at most that many prompt tokens (a server that cut the prompt
    silently); `cache_net` makes Ollama's prompt count net of its prompt cache (only what a
    request adds to the previous one); `responder(body)` answers when the
    queue is empty; `strict_tools` refuses a history with an orphaned tool result or a call left
    without one; `strict_dialect` checks each request as the real API of its endpoint does
    (`strict`)."""

    # Writes each response; the relay benchmark swaps in one that notes when frames leave.
    response_writer: type[ResponseWriter] = ResponseWriter

    def __init__(
        self,
        *,
        window: int | None = None,
        report_window: int | None = None,
        cap_prompt_tokens: int | None = None,
        cache_net: bool = False,
        responder: Responder | None = None,
        strict_tools: bool = False,
        strict_dialect: bool = False,
        api_key: str | None = None,
    ) -> None:
        self.url = ""
        self.api_key = api_key  # when set, a request without it is refused with HTTP 401
        self.requests: list[Recorded] = []
        self.info: dict[str, Any] = {"model": "mock-model"}
        self.window = window
        self.cap_prompt_tokens = cap_prompt_tokens
        self.responder = responder
        self.strict_tools = strict_tools
        self.strict_dialect = strict_dialect  # each request checked as its real API does
        self.signatures: dict[str, str] = {}  # thinking signature issued -> the model it names
        # Responses API: reasoning items issued (id -> item with its model), and for each call
        # made after reasoning, the ids of that response's reasoning items in order.
        self.reasoning: dict[str, dict[str, Any]] = {}
        self.reasoning_calls: dict[str, list[str]] = {}
        self.counted: list[int] = []  # the prompt tokens of every chat request, in order
        self.overflows: list[Recorded] = []  # chat requests refused for the window
        # Refused by `strict_tools` or `strict_dialect`, and why.
        self.invalid: list[tuple[Recorded, str]] = []
        # Ollama's prompt_eval_count net of its prompt cache: a request that extends the
        # previous one counts only the new tokens (older Ollama; llama.cpp's cache does it too).
        self.cache_net = cache_net
        self._cached: tuple[list[Any], int] | None = None
        self._script: deque[Response] = deque()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        if report_window is not None:
            self.report_window = report_window

    def queue(self, *responses: Response) -> None:
        """Append responses, served in order to the chat endpoints of any dialect."""
        self._script.extend(responses)

    def set(self, **info: Any) -> None:
        """Discovery data: model, context_length; overrides n_ctx, num_ctx, n_ctx_train, arch."""
        self.info.update(info)

    @property
    def report_window(self) -> int | None:
        """The window the discovery endpoints report (`set(context_length=...)`)."""
        value = self.info.get("context_length")
        return value if isinstance(value, int) else None

    @report_window.setter
    def report_window(self, tokens: int | None) -> None:
        self.info["context_length"] = tokens

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        return len(self._script)

    @property
    def chat_requests(self) -> list[Recorded]:
        """The recorded requests that went to a chat endpoint."""
        return [r for r in self.requests if r.path in CHAT_PATHS]

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1 (on `port`, or on a free one)."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port)
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
            request = await read_request(reader)
            if request is not None:
                self.requests.append(request)
                await self._route(request, self.response_writer(writer))
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

    def _authorized(self, req: Recorded) -> bool:
        given = (req.headers.get("authorization", ""), req.headers.get("x-api-key", ""))
        return self.api_key is None or f"Bearer {self.api_key}" in given or self.api_key in given

    async def _route(self, req: Recorded, out: ResponseWriter) -> None:
        if not self._authorized(req):
            dialect = CHAT_PATHS.get(req.path, openai.DIALECT)
            body = dialect.error_body(401, "mock: invalid API key", "authentication_error")
            await out.whole(401, body)
        elif req.method == "POST" and req.path in CHAT_PATHS:
            await self._chat(CHAT_PATHS[req.path], req, out)
        elif req.method == "GET" and req.path in ("/v1/models", "/models"):
            await out.whole(200, discovery.models(self.info))
        elif req.method == "GET" and req.path == "/props" and discovery.knows_window(self.info):
            await out.whole(200, discovery.props(self.info))
        elif req.method == "POST" and req.path == "/api/show":
            status, show = discovery.show(self.info, req.json)
            await out.whole(status, show)
        elif req.method == "GET" and req.path == "/api/tags":
            await out.whole(200, discovery.tags(self.info))
        else:
            message = f"mock: no route for {req.method} {req.path}"
            await out.whole(
                404, {"error": {"code": 404, "message": message, "type": "not_found_error"}}
            )

    # chat -----------------------------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> Response | None:
        """The response to serve; None means "rejected without consuming it"."""
        if not self._script and self.responder is not None:
            try:
                return self.responder(body)
            except Exception as exc:  # a broken responder shows at once (400: never retried)
                return {"fault": "status", "status": 400, "message": f"mock responder: {exc!r}"}
        if not self._script:
            return {"text": NO_SCRIPT_TEXT, "finish": "stop"}
        resp = self._script[0]
        if resp.get("fault") == "reject_stream_options" and "stream_options" in body:
            return None
        return self._script.popleft()

    async def _admit(self, dialect: Dialect, req: Recorded, out: ResponseWriter) -> int | None:
        """The request's prompt tokens; None when it was refused, as a strict server or one
        with a small window refuses it."""
        problem = tool_problem(conversation(req.json)) if self.strict_tools else None
        if problem is None and self.strict_dialect:
            found = strict.problems(
                dialect, req.json, self.signatures, self.reasoning, self.reasoning_calls
            )
            problem = "; ".join(found) or None
        refused = refusal(req.json) if self.strict_dialect and dialect is openai.DIALECT else None
        if refused is not None:
            self.invalid.append((req, refused["error"]["message"]))
            await out.whole(400, refused)
            return None
        if problem is not None:
            self.invalid.append((req, problem))
            await out.whole(400, dialect.error_body(400, problem, "invalid_request_error"))
            return None
        tokens = count_tokens(req.json)
        self.counted.append(tokens)
        if self.window is not None and tokens > self.window:
            self.overflows.append(req)
            await out.whole(400, dialect.overflow_body(tokens, self.window))
            return None
        return tokens

    async def _chat(self, dialect: Dialect, req: Recorded, out: ResponseWriter) -> None:
        body = req.json if isinstance(req.json, dict) else {}
        prompt_tokens = await self._admit(dialect, req, out)
        if prompt_tokens is None:
            return
        resp = self._next(body)
        if resp is None:
            message = "Unrecognized request argument supplied: stream_options"
            await out.whole(400, dialect.error_body(400, message, None))
            return
        out.extra = dict(resp.get("headers") or {})
        fault = resp.get("fault")
        if fault == "reject_null_content" and any(
            isinstance(m, dict) and "content" in m and m["content"] is None
            for m in body.get("messages") or []
        ):
            await out.whole(400, dialect.error_body(400, "content must be a string", None))
            return
        if fault in ("status", "html"):
            await self._status_fault(dialect, resp, out)
            return
        if fault == "slow_first_byte":
            await asyncio.sleep(float(resp.get("seconds", 1.0)))
        plan = make_plan(resp, prompt_tokens)
        if plan.usage is not None and self.cache_net and dialect is ollama.DIALECT:
            plan.usage["prompt_tokens"] = self._net_of_cache(body, plan.usage["prompt_tokens"])
        if plan.usage is not None and self.cap_prompt_tokens is not None:
            capped = min(plan.usage["prompt_tokens"], self.cap_prompt_tokens)
            plan.usage["prompt_tokens"] = capped
        model = str(body.get("model") or self.info["model"])
        if plan.thought and dialect is anthropic.DIALECT:
            plain = "" if self.strict_dialect else plan.signature
            plan.signature = strict.signature_for(
                model, self.signatures, resp.get("signature"), plain
            )
        self._sign(dialect, plan, model)
        if body.get("stream", dialect.streams_by_default):
            await self._stream(dialect, plan, body, model, out)
        else:
            await self._complete(dialect, plan, model, out)

    def _sign(self, dialect: Dialect, plan: Plan, model: str) -> None:
        """Reasoning items of a Responses reasoning model (two before tool calls, so that each
        must come back on its own), and Gemini 3's thought signature on its first tool call."""
        if dialect is responses.DIALECT and strict.is_reasoning_model(model):
            for call in plan.calls:  # unique ids: each call's reasoning is checked by its id
                call.id = call.id or f"call_r{len(self.reasoning) + 1}_{plan.calls.index(call)}"
            count = int(plan.raw.get("reasoning_items", 2 if plan.calls else 1))
            plan.reasoning = responses.issue_reasoning(plan, model, self.reasoning, count)
            for call in plan.calls:
                self.reasoning_calls[str(call.id)] = [item["id"] for item in plan.reasoning]
        if dialect is openai.DIALECT and plan.calls and strict.is_gemini3(model):
            plan.call_signature = strict.signature_for(model, self.signatures, None, "")

    def _net_of_cache(self, body: dict[str, Any], tokens: int) -> int:
        """The prompt count of a server that counts only what its cache did not hold."""
        messages = list(body.get("messages") or [])
        previous, self._cached = self._cached, (messages, tokens)
        if previous is not None and messages[: len(previous[0])] == previous[0]:
            return max(tokens - previous[1], 1)
        return tokens

    async def _status_fault(self, dialect: Dialect, resp: Response, out: ResponseWriter) -> None:
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
        body = resp.get("body", dialect.error_body(status, message, resp.get("error_type")))
        await out.whole(status, body, headers=extra)

    async def _complete(
        self, dialect: Dialect, plan: Plan, model: str, out: ResponseWriter
    ) -> None:
        fault = plan.raw.get("fault")
        if fault == "error_frame":
            message = plan.raw.get("message", ERROR_FRAME_TEXT)
            await out.whole(200, dialect.error_body(500, message, None))
            return
        if fault == "empty_stream":
            await out.whole(200, b"", "application/json")
            return
        data = json.dumps(dialect.complete(plan, model)).encode()
        if fault == "stall":
            await asyncio.sleep(float(plan.raw.get("seconds", 1.0)))
        await out.head(200, "application/json", length=len(data))
        if fault == "cut":  # promise the whole body, deliver half, hang up
            data = data[: len(data) // 2]
        await out.send(data)

    async def _stream(
        self, dialect: Dialect, plan: Plan, req: dict[str, Any], model: str, out: ResponseWriter
    ) -> None:
        frames, body_end = dialect.frames(plan, req, model)
        resp = plan.raw
        fault = resp.get("fault")
        after = int(resp.get("after", max(1, body_end // 2)))
        if fault == "empty_stream":
            frames = []
        elif fault == "cut":
            frames = frames[: min(after, body_end)]
        elif fault == "error_frame":
            message = resp.get("message", ERROR_FRAME_TEXT)
            frames = [
                *frames[: min(int(resp.get("after", 0)), body_end)],
                dialect.error_frame(message, resp.get("error_type")),
            ]
        out.chunked = resp.get("chunked", True)
        await out.head(200, dialect.stream_type, headers={"Cache-Control": "no-cache"})
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
async def running_mock_llm(**options: Any) -> AsyncIterator[MockLLM]:
    """Start a MockLLM (with `MockLLM`'s options) for the duration of the block."""
    server = MockLLM(**options)
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
