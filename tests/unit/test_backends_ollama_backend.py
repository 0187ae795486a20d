"""The Ollama backend against the mock LLM server (real TCP) and, for odd shapes, MockTransport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from acp_server.backends._http import RetryPolicy
from acp_server.backends.ollama.backend import DEFAULT_NUM_CTX, OllamaBackend
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    Notice,
    StreamError,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCall,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    Usage,
    text_message,
)
from tests.support.mock_llm import MockLLM, running_mock_llm

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002, retry_after_cap=0.01)
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})
ASK = ModelRequest(messages=(text_message("user", "hi"),), system="Be brief.")
ASK_TOOLS = ModelRequest(messages=(text_message("user", "read a.py"),), tools=(READ,))


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm() as server:
        yield server


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., OllamaBackend]]:
    """Builds backends (against the mock server or a MockTransport) and closes them after."""
    made: list[OllamaBackend] = []

    def build(url: str, **kw: Any) -> OllamaBackend:
        kw.setdefault("retry", FAST)
        made.append(OllamaBackend(url, kw.pop("model", "qwen3:8b"), **kw))
        return made[-1]

    yield build
    for backend in made:
        await backend.aclose()


def transport(*lines: dict[str, Any], show: Any = None) -> httpx.MockTransport:
    """A server that answers `/api/chat` with these NDJSON lines and `/api/show` with `show`."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/show":
            return httpx.Response(200, json=show) if show else httpx.Response(404, json={})
        body = "".join(json.dumps(line) + "\n" for line in lines)
        return httpx.Response(200, content=body.encode())

    return httpx.MockTransport(answer)


def done(reason: str = "stop") -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": reason}


async def collect(backend: OllamaBackend, request: ModelRequest = ASK) -> list[Event]:
    return [event async for event in backend.stream(request)]


def text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls(events: list[Event]) -> list[ToolCall]:
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assembler.add(event)
    return assembler.calls("unused_")


def errors(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, StreamError)]


# ----- rendering --------------------------------------------------------------------------------


async def test_the_request_body(llm: MockLLM, make: Any) -> None:
    llm.set(context_length=8192, capabilities=["completion", "tools", "vision"])
    llm.queue({"text": "ok"})
    history = (
        Message(role="user", content=(TextPart("what is this?"), ImagePart("aGk=", "image/png"))),
        Message(
            role="assistant",
            content=(TextPart("Let me look."),),
            thought="secret reasoning",
            tool_calls=(ToolCall("call_1", "read_file", {"path": "a.py"}),),
        ),
        text_message("tool", "print(1)", tool_call_id="call_1"),
    )
    request = ModelRequest(messages=history, tools=(READ,), system="Be brief.", max_tokens=99)
    await collect(make(llm.url), request)
    [chat] = llm.chat_requests
    assert chat.path == "/api/chat"
    assert chat.json == {
        "model": "qwen3:8b",
        "stream": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "what is this?", "images": ["aGk="]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"function": {"name": "read_file", "arguments": {"path": "a.py"}}},
            ]},
            {"role": "tool", "content": "print(1)", "tool_name": "read_file",
             "tool_call_id": "call_1"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "read_file", "description": "Read a file", "parameters": READ.parameters}}],
        "options": {"num_ctx": 8192, "num_predict": 99},
    }  # fmt: skip
    assert "secret reasoning" not in chat.body.decode()


async def test_think_is_sent_only_when_set(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "a"}, {"text": "b"})
    await collect(make(llm.url, think=True))
    await collect(make(llm.url))
    first, second = llm.chat_requests
    assert first.json["think"] is True and "think" not in second.json
    assert "tools" not in second.json


# ----- streamed replies -------------------------------------------------------------------------


async def test_text_thinking_and_usage(llm: MockLLM, make: Any) -> None:
    llm.queue(
        {"thought": "Hmm, a greeting.", "text": "Hello there", "usage": {"prompt_tokens": 120,
                                                                          "completion_tokens": 7}}
    )  # fmt: skip
    events = await collect(make(llm.url))
    assert events == [
        ThoughtDelta("Hmm,"),
        ThoughtDelta(" a"),
        ThoughtDelta(" greeting."),
        TextDelta("Hello"),
        TextDelta(" there"),
        Usage(120, 7, 0),
        Finish("stop"),
    ]


async def test_two_tool_calls_get_unique_made_up_ids(llm: MockLLM, make: Any) -> None:
    pair = [
        {"name": "read_file", "arguments": {"path": "a.py"}},
        {"name": "list_dir", "arguments": {"path": "."}},
    ]
    llm.queue({"tool_calls": pair}, {"tool_calls": pair[:1]})
    backend = make(llm.url)
    first = await collect(backend, ASK_TOOLS)
    second = await collect(backend, ASK_TOOLS)
    assert [(c.name, c.arguments) for c in calls(first)] == [
        ("read_file", {"path": "a.py"}),
        ("list_dir", {"path": "."}),
    ]
    assert first[-1] == Finish("tool_calls")  # Ollama said "stop"
    ids = [c.id for c in calls(first) + calls(second)]
    assert len(set(ids)) == 3 and all(i.startswith("call_") for i in ids)
    other = make(llm.url)
    llm.queue({"tool_calls": pair[:1]})
    assert calls(await collect(other, ASK_TOOLS))[0].id not in ids


async def test_ids_the_server_sends_are_kept(llm: MockLLM, make: Any) -> None:
    llm.queue({"tool_calls": [{"id": "call_x", "name": "read_file", "arguments": {}}],
               "ollama_ids": True})  # fmt: skip
    events = await collect(make(llm.url), ASK_TOOLS)
    assert [(c.id, c.arguments) for c in calls(events)] == [("call_x", {})]


async def test_missing_counts_mean_unknown(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "ok", "usage": None})
    events = await collect(make(llm.url))
    assert Usage(0, 0, 0) in events and events[-1] == Finish("stop")


async def test_a_reasoning_only_reply_cut_by_length(llm: MockLLM, make: Any) -> None:
    llm.queue({"thought": "Let me think", "finish": "length", "usage": None})
    events = await collect(make(llm.url))
    assert events == [ThoughtDelta("Let"), ThoughtDelta(" me"), ThoughtDelta(" think"),
                      Usage(0, 0, 0), Finish("length")]  # fmt: skip


@pytest.mark.parametrize(
    ("reason", "neutral"),
    [("stop", "stop"), ("length", "length"), ("unload", "stop"), ("", "stop")],
)
async def test_done_reasons(make: Any, reason: str, neutral: FinishReason) -> None:
    line = {"message": {"role": "assistant", "content": "x"}, "done": False}
    backend = make("http://ollama.test", transport=transport(line, done(reason)))
    assert (await collect(backend))[-1] == Finish(neutral)


async def test_tool_call_markup_in_the_text_is_recovered(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "Reading.", "fault": "inline_tool_call", "name": "read_file",
               "arguments": {"path": "a.py"}})  # fmt: skip
    events = await collect(make(llm.url), ASK_TOOLS)
    assert text(events) == "Reading."
    [call] = calls(events)
    assert (call.name, call.arguments) == ("read_file", {"path": "a.py"})
    assert call.id.startswith("call_recovered_") and events[-1] == Finish("tool_calls")


async def test_arguments_sent_as_text_and_nameless_calls(make: Any) -> None:
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "read_file", "arguments": '{"path": "b"}'}},
        {"function": {"arguments": {}}},
    ]}  # fmt: skip
    backend = make("http://ollama.test", transport=transport({"message": message}, done()))
    events = await collect(backend, ASK_TOOLS)
    assert [(c.name, c.arguments) for c in calls(events)] == [("read_file", {"path": "b"})]


# ----- faults -----------------------------------------------------------------------------------


async def test_a_429_with_retry_after_then_success(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "status", "status": 429, "retry_after": 2}, {"text": "ok"})
    events = await collect(make(llm.url))
    notice = next(e for e in events if isinstance(e, Notice))
    assert "HTTP 429 (rate limited)" in notice.text and "0.01 s" in notice.text
    assert events.index(notice) < events.index(TextDelta("ok")) and events[-1] == Finish("stop")


async def test_an_html_502_becomes_its_status(llm: MockLLM, make: Any) -> None:
    llm.queue(*[{"fault": "html", "status": 502}] * 3)
    [message] = errors(await collect(make(llm.url)))
    assert message.startswith("The model server answered HTTP 502 Bad Gateway")
    assert "<" not in message and "gave up after 3 attempts" in message


async def test_an_error_line_in_a_200_stream(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "one two three", "fault": "error_frame", "after": 2,
               "message": "llama runner process has terminated"})  # fmt: skip
    events = await collect(make(llm.url))
    assert text(events) == "one two"
    assert errors(events) == [
        "The model server reported an error: llama runner process has terminated"
    ]
    assert len(llm.chat_requests) == 1


async def test_an_overloaded_error_line_before_output_is_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "error_frame"}, {"text": "ok"})
    events = await collect(make(llm.url))
    assert text(events) == "ok" and any(isinstance(e, Notice) for e in events)


async def test_a_stream_cut_mid_reply(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "one two three four", "fault": "cut", "after": 2})
    events = await collect(make(llm.url))
    assert text(events) == "one two"
    [message] = errors(events)
    assert "closed the connection" in message and "incomplete chunked read" in message
    assert len(llm.chat_requests) == 1


async def test_a_body_that_ends_without_done(make: Any) -> None:
    line = {"message": {"role": "assistant", "content": "partial"}, "done": False}
    events = await collect(make("http://ollama.test", transport=transport(line)))
    assert text(events) == "partial"
    assert errors(events) == ["The connection to Ollama closed mid-reply."]


async def test_a_stream_cut_before_any_output_is_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "lost", "fault": "cut", "after": 0}, {"text": "ok"})
    events = await collect(make(llm.url))
    assert text(events) == "ok" and len(llm.chat_requests) == 2


async def test_an_unknown_model_says_how_to_pull_it(make: Any) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": "model 'nope' not found"})

    backend = make("http://ollama.test", model="nope", transport=httpx.MockTransport(answer))
    assert errors(await collect(backend)) == [
        "The model server answered HTTP 404 Not Found: model 'nope' not found "
        "Download it with `ollama pull nope`."
    ]


async def test_a_server_that_is_not_running(make: Any) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    backend = make("http://ollama.test", transport=httpx.MockTransport(refuse))
    [message] = errors(await collect(backend))
    assert message.startswith("Could not connect to the model server at http://ollama.test")
    hint = "Is Ollama running? Start it with `ollama serve` (gave up after 3 attempts)."
    assert message.endswith(hint)


# ----- context window ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "configured", "sent", "window"),
    [
        ({"context_length": 131072, "num_ctx": None}, None, DEFAULT_NUM_CTX, DEFAULT_NUM_CTX),
        ({"context_length": 8192, "num_ctx": None}, None, 8192, 8192),
        ({"context_length": 131072, "num_ctx": 16384}, None, 16384, 16384),
        ({"context_length": 40960}, 65536, 65536, 40960),
        ({"context_length": 131072, "num_ctx": 16384}, 4096, 4096, 4096),
        ({"arch": "qwen3", "context_length": None}, None, DEFAULT_NUM_CTX, DEFAULT_NUM_CTX),
    ],
)
async def test_the_window_is_what_is_sent_capped_by_training(
    llm: MockLLM, make: Any, info: dict[str, Any], configured: int | None, sent: int, window: int
) -> None:
    llm.set(**info)
    llm.queue({"text": "ok"})
    backend = make(llm.url, num_ctx=configured)
    assert await backend.context_window() == window
    await collect(backend)
    assert await backend.context_window() == window
    assert llm.chat_requests[0].json["options"] == {"num_ctx": sent}
    shows = [r for r in llm.requests if r.path == "/api/show"]
    assert [r.json for r in shows] == [{"model": "qwen3:8b"}]  # asked once, then cached


async def test_the_architecture_key_is_read_from_general_architecture(make: Any) -> None:
    show = {
        "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 131072,
                       "gemma3.vision.context_length": 4},
        "parameters": 'stop                           "<end_of_turn>"\nnum_ctx 12288',
    }  # fmt: skip
    backend = make("http://ollama.test", transport=transport(show=show), default_num_ctx=1)
    assert await backend.context_window() == 12288
    assert backend.num_ctx == 12288


async def test_without_show_only_a_configured_num_ctx_is_sent(make: Any) -> None:
    reply = ({"message": {"role": "assistant", "content": "ok"}}, done())
    unknown = make("http://ollama.test", transport=transport(*reply))
    assert await unknown.context_window() is None
    await collect(unknown)
    configured = make("http://ollama.test", num_ctx=4096, transport=transport(*reply))
    assert await configured.context_window() == 4096


async def test_a_failed_show_sends_no_options(make: Any) -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/show":
            return httpx.Response(500, text="boom")
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=(json.dumps(done()) + "\n").encode())

    await collect(make("http://ollama.test", transport=httpx.MockTransport(answer)))
    assert "options" not in seen[0]
