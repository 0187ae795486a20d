"""The Anthropic backend against the mock LLM server (real TCP); MockTransport for odd shapes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from acp_server.backends import catalog
from acp_server.backends._http import RetryPolicy
from acp_server.backends.anthropic.backend import AnthropicBackend, known_window
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    Notice,
    PrivateData,
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
MODEL = "claude-sonnet-4-5"
EPHEMERAL = {"type": "ephemeral"}  # a cache breakpoint (_anthropic_wire.mark_cache)


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm() as server:
        yield server


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., AnthropicBackend]]:
    """Builds backends (against the mock server or a MockTransport) and closes them after."""
    made: list[AnthropicBackend] = []

    def build(url: str, **kw: Any) -> AnthropicBackend:
        kw.setdefault("retry", FAST)
        made.append(
            AnthropicBackend(url, kw.pop("model", MODEL), kw.pop("api_key", "sk-ant"), **kw)
        )
        return made[-1]

    yield build
    for backend in made:
        await backend.aclose()


def sse_reply(*events: dict[str, Any]) -> httpx.MockTransport:
    """A server that answers every request with these SSE events (named by their `type`)."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.MockTransport(answer)


def start(input_tokens: int = 10) -> dict[str, Any]:
    usage = {"input_tokens": input_tokens, "output_tokens": 1}
    return {"type": "message_start", "message": {"role": "assistant", "usage": usage}}


def text_block(index: int, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": index},
    ]  # fmt: skip


def end(stop_reason: str | None, output_tokens: int = 5) -> list[dict[str, Any]]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason}}
    return [{**delta, "usage": {"output_tokens": output_tokens}}, {"type": "message_stop"}]


async def collect(backend: AnthropicBackend, request: ModelRequest = ASK) -> list[Event]:
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


def assistant_from(events: list[Event]) -> Message:
    """The assistant message the agent loop records from a round's events."""
    extra: dict[str, Any] = {}
    for event in events:
        if isinstance(event, PrivateData):
            extra.update(event.data)
    content = (TextPart(text(events)),) if text(events) else ()
    thought = "".join(e.text for e in events if isinstance(e, ThoughtDelta))
    return Message("assistant", content, tuple(calls(events)), thought=thought, extra=extra)


# ----- rendering --------------------------------------------------------------------------------


async def test_the_request_body(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "ok"})
    history = (
        text_message("user", "first"),
        Message(role="user", content=(TextPart("what is this?"), ImagePart("aGk=", "image/png"))),
        Message(
            role="assistant",
            content=(TextPart("Let me look."),),
            thought="unsigned reasoning",
            tool_calls=(
                ToolCall("toolu_1", "read_file", {"path": "a.py"}),
                ToolCall("toolu_2", "read_file", {"path": "b.py"}),
            ),
        ),
        text_message("tool", "print(1)", tool_call_id="toolu_1"),
        text_message("tool", "", tool_call_id="toolu_2"),
        text_message("user", "and now?"),
        Message(role="assistant"),  # a cancelled reply that said nothing
        text_message("user", "  "),
        text_message("user", "hello?"),
    )
    request = ModelRequest(messages=history, tools=(READ,), system="Be brief.", max_tokens=99)
    await collect(make(llm.url), request)
    [chat] = llm.chat_requests
    assert chat.path == "/v1/messages"
    assert chat.headers["x-api-key"] == "sk-ant"
    assert chat.headers["anthropic-version"] == "2023-06-01"
    assert chat.json == {
        "model": MODEL,
        "max_tokens": 99,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "first"},
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "aGk="}, "cache_control": EPHEMERAL},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                 "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_2", "name": "read_file",
                 "input": {"path": "b.py"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"},
                {"type": "tool_result", "tool_use_id": "toolu_2"},
                {"type": "text", "text": "and now?"},
                {"type": "text", "text": "hello?", "cache_control": EPHEMERAL},
            ]},
        ],
        "tools": [{"name": "read_file", "description": "Read a file",
                   "input_schema": READ.parameters, "cache_control": EPHEMERAL}],
        "stream": True,
    }  # fmt: skip
    assert "unsigned reasoning" not in chat.body.decode()


async def test_defaults_and_a_base_url_with_v1(make: Any) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"")

    backend = make("https://proxy.test/v1/", api_key=None, transport=httpx.MockTransport(answer))
    await collect(backend)
    assert str(seen[0].url) == "https://proxy.test/v1/messages"
    assert "x-api-key" not in seen[0].headers
    body = json.loads(seen[0].content)
    assert body["max_tokens"] == 64_000  # Sonnet 4.5's output limit
    assert "tools" not in body and "thinking" not in body


async def test_image_tool_results_and_system_messages(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "ok"})
    history = (
        text_message("system", "Old rules."),
        text_message("user", "look"),
        Message("assistant", tool_calls=(ToolCall("toolu_1", "screenshot", {}),)),
        Message("tool", (TextPart("here"), ImagePart("aGk=", "image/png")), tool_call_id="toolu_1"),
    )
    await collect(make(llm.url), ModelRequest(messages=history, system="New rules."))
    body = llm.chat_requests[0].json
    assert body["system"] == [
        {"type": "text", "text": "New rules.\n\nOld rules.", "cache_control": EPHEMERAL}
    ]
    assert body["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "aGk="}},
        ], "cache_control": EPHEMERAL},
    ]  # fmt: skip


# ----- thinking signatures ----------------------------------------------------------------------


async def test_signed_thinking_goes_back_unchanged_with_the_tool_calls(
    llm: MockLLM, make: Any
) -> None:
    llm.queue(
        {"thought": "I should read it.", "signature": "sig-XYZ==", "text": "Reading.",
         "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]},
        {"text": "done"},
    )  # fmt: skip
    backend = make(llm.url, thinking_budget=2048)
    first = await collect(backend, ASK_TOOLS)
    reply = assistant_from(first)
    kept = [
        {"type": "thinking", "thinking": "I should read it.", "signature": "sig-XYZ=="},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_mock0", "name": "read_file"},
    ]
    assert reply.extra == {"anthropic": {"model": MODEL, "content": kept}}
    assert [e for e in first if isinstance(e, PrivateData | Usage | Finish)][-1] == Finish(
        "tool_calls"
    )
    result = text_message("tool", "print(1)", tool_call_id="toolu_mock0")
    follow = ModelRequest(messages=(*ASK_TOOLS.messages, reply, result), tools=(READ,))
    await collect(backend, follow)
    first_body, second_body = (r.json for r in llm.chat_requests)
    assert first_body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first_body["max_tokens"] == 64_000
    assert second_body["thinking"] == first_body["thinking"]
    assert second_body["messages"][1] == {
        "role": "assistant",
        "content": [*kept[:2], {**kept[2], "input": {"path": "a.py"}}],
    }


async def test_no_private_data_without_tool_calls(llm: MockLLM, make: Any) -> None:
    llm.queue({"thought": "Easy.", "text": "Hi."})
    events = await collect(make(llm.url, thinking_budget=1024))
    assert not any(isinstance(e, PrivateData) for e in events)
    assert llm.chat_requests[0].json["max_tokens"] == 64_000


async def test_thinking_is_left_off_when_the_pending_calls_lost_their_thinking(
    llm: MockLLM, make: Any
) -> None:
    llm.queue({"text": "ok"}, {"text": "ok"})
    call = ToolCall("toolu_1", "read_file", {})
    stale = {
        "anthropic": {
            "content": [
                {"type": "thinking", "thinking": "x", "signature": "s"},
                {"type": "tool_use", "id": "toolu_other", "name": "x"},
            ]
        }
    }
    history = (
        text_message("user", "go"),
        Message("assistant", tool_calls=(call,), extra=stale),  # ids do not match: not used
        text_message("tool", "done", tool_call_id="toolu_1"),
    )
    backend = make(llm.url, thinking_budget=16000, max_tokens=4096)
    await collect(backend, ModelRequest(messages=history))
    await collect(backend, ModelRequest(messages=history[:1]))
    without, fresh = (r.json for r in llm.chat_requests)
    assert "thinking" not in without and without["max_tokens"] == 4096
    assert without["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    ]
    assert fresh["thinking"]["budget_tokens"] == 16000 and fresh["max_tokens"] == 17024


async def test_blocks_signed_by_another_model_are_not_resent(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "ok"})
    call = ToolCall("toolu_1", "ls", {})
    kept = {"anthropic": {"model": "claude-opus-4-1", "content": [
        {"type": "thinking", "thinking": "x", "signature": "s"},
        {"type": "tool_use", "id": "toolu_1", "name": "ls"},
    ]}}  # fmt: skip
    history = (
        text_message("user", "go"),
        Message("assistant", tool_calls=(call,), extra=kept),
        text_message("tool", "a.py", tool_call_id="toolu_1"),
    )
    await collect(make(llm.url, thinking_budget=2048), ModelRequest(messages=history))
    body = llm.chat_requests[0].json
    assert "thinking" not in body and "signature" not in json.dumps(body)


async def test_malformed_frames_are_skipped(make: Any) -> None:
    events = [
        start(),
        {"type": "content_block_start", "index": "zero", "content_block": {"type": "text"}},
        {"type": "content_block_start", "index": 0, "content_block": None},
        {"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "?"}},
        {"type": "content_block_stop"},
        {"type": "something_new", "index": 0},
        *text_block(0, "fine"),
        *end("end_turn"),
    ]
    got = await collect(make("https://api.test", transport=sse_reply(*events)))
    assert text(got) == "fine" and got[-1] == Finish("stop")


async def test_redacted_thinking_and_interleaved_order_are_kept(make: Any) -> None:
    events = [
        start(),
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "redacted_thinking", "data": "ENCRYPTED"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_a", "name": "ls", "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "thinking_delta", "thinking": "then"}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "signature_delta", "signature": "S2"}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3,
         "content_block": {"type": "tool_use", "id": "toolu_b", "name": "ls", "input": {}}},
        {"type": "content_block_stop", "index": 3},
        *end("tool_use"),
    ]  # fmt: skip
    reply = assistant_from(await collect(make("https://api.test", transport=sse_reply(*events))))
    assert [c.id for c in reply.tool_calls] == ["toolu_a", "toolu_b"]
    assert reply.extra["anthropic"]["content"] == [
        {"type": "redacted_thinking", "data": "ENCRYPTED"},
        {"type": "tool_use", "id": "toolu_a", "name": "ls"},
        {"type": "thinking", "thinking": "then", "signature": "S2"},
        {"type": "tool_use", "id": "toolu_b", "name": "ls"},
    ]


# ----- streamed replies -------------------------------------------------------------------------


async def test_text_thinking_and_usage_with_cache_tokens(llm: MockLLM, make: Any) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 800,
             "cache_creation_tokens": 100}  # fmt: skip
    llm.queue({"thought": "A greeting.", "text": "Hello there", "usage": usage})
    events = await collect(make(llm.url))
    assert events == [
        ThoughtDelta("A"),
        ThoughtDelta(" greeting."),
        TextDelta("Hello"),
        TextDelta(" there"),
        Usage(prompt_tokens=1000, completion_tokens=50, cached_tokens=800, cache_write_tokens=100),
        Finish("stop"),
    ]


async def test_two_parallel_tool_calls(llm: MockLLM, make: Any) -> None:
    llm.queue(
        {"text": "Both.", "tool_calls": [
            {"id": "toolu_a", "name": "read_file", "arguments": {"path": "a.py"}},
            {"id": "toolu_b", "name": "list_dir", "arguments": {"path": ".", "depth": 2}},
        ]}
    )  # fmt: skip
    events = await collect(make(llm.url), ASK_TOOLS)
    assert [(c.id, c.name, c.arguments) for c in calls(events)] == [
        ("toolu_a", "read_file", {"path": "a.py"}),
        ("toolu_b", "list_dir", {"path": ".", "depth": 2}),
    ]
    assert text(events) == "Both." and events[-1] == Finish("tool_calls")


async def test_a_tool_input_given_whole_at_the_block_start(make: Any) -> None:
    events = [
        start(),
        {"type": "content_block_start", "index": 0, "content_block":
         {"type": "tool_use", "id": "toolu_w", "name": "ls", "input": {"path": "src"}}},
        {"type": "content_block_stop", "index": 0},
        *end("tool_use"),
    ]  # fmt: skip
    got = await collect(make("https://api.test", transport=sse_reply(*events)))
    assert [(c.id, c.arguments) for c in calls(got)] == [("toolu_w", {"path": "src"})]


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "refusal"),
        ("pause_turn", "stop"),
        ("model_context_window_exceeded", "length"),
        ("something_new", "stop"),
        (None, "stop"),
    ],
)
async def test_stop_reasons(make: Any, wire: str | None, neutral: FinishReason) -> None:
    events = [start(), {"type": "ping"}, *text_block(0, "x"), *end(wire)]
    got = await collect(make("https://api.test", transport=sse_reply(*events)))
    assert got[-2:] == [Usage(10, 5, 0), Finish(neutral)]


async def test_a_reasoning_only_reply_cut_by_length(llm: MockLLM, make: Any) -> None:
    llm.queue({"thought": "Let me think", "finish": "length",
               "usage": {"prompt_tokens": 20, "completion_tokens": 64}})  # fmt: skip
    events = await collect(make(llm.url))
    assert events == [ThoughtDelta("Let"), ThoughtDelta(" me"), ThoughtDelta(" think"),
                      Usage(20, 64, 0), Finish("length")]  # fmt: skip


# ----- faults -----------------------------------------------------------------------------------


async def test_a_429_with_retry_after_then_success(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "status", "status": 429, "retry_after": 3}, {"text": "ok"})
    events = await collect(make(llm.url))
    notice = next(e for e in events if isinstance(e, Notice))
    assert "HTTP 429 (rate limited)" in notice.text and "0.01 s" in notice.text
    assert events.index(notice) < events.index(TextDelta("ok")) and events[-1] == Finish("stop")


async def test_a_529_overloaded_is_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "status", "status": 529, "message": "Overloaded"}, {"text": "ok"})
    events = await collect(make(llm.url))
    assert text(events) == "ok" and len(llm.chat_requests) == 2


async def test_an_html_502_becomes_its_status(llm: MockLLM, make: Any) -> None:
    llm.queue(*[{"fault": "html", "status": 502}] * 3)
    [message] = errors(await collect(make(llm.url)))
    assert message.startswith("The model server answered HTTP 502 Bad Gateway")
    assert "<" not in message and "gave up after 3 attempts" in message


async def test_401_names_the_key_variable_and_is_not_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "status", "status": 401, "message": "invalid x-api-key"})
    [message] = errors(await collect(make(llm.url)))
    assert "ANTHROPIC_API_KEY" in message and "invalid x-api-key" in message
    assert len(llm.chat_requests) == 1


async def test_an_overloaded_error_event_before_output_is_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "lost", "fault": "error_frame"}, {"text": "ok"})
    events = await collect(make(llm.url))
    assert text(events) == "ok" and any(isinstance(e, Notice) for e in events)
    assert len(llm.chat_requests) == 2


async def test_an_error_event_after_output_ends_the_round(llm: MockLLM, make: Any) -> None:
    # Frames: message_start, ping, block start, "one", " two", ...: after=4 is after "one".
    llm.queue({"text": "one two three", "fault": "error_frame", "after": 4})
    events = await collect(make(llm.url))
    assert text(events) == "one"
    assert errors(events) == ["The model server reported an error: mock: the model is overloaded"]
    assert len(llm.chat_requests) == 1


async def test_a_final_error_event_is_not_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "error_frame", "error_type": "api_error", "message": "Internal error"})
    events = await collect(make(llm.url))
    assert errors(events) == ["The model server reported an error: Internal error"]
    assert len(llm.chat_requests) == 1


async def test_a_stream_cut_mid_reply(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "one two three four", "fault": "cut", "after": 5})
    events = await collect(make(llm.url))
    assert text(events) == "one two"
    [message] = errors(events)
    assert "closed the connection" in message and len(llm.chat_requests) == 1


async def test_a_body_that_ends_without_message_stop(make: Any) -> None:
    events = [start(), *text_block(0, "partial")]
    got = await collect(make("https://api.test", transport=sse_reply(*events)))
    assert text(got) == "partial"
    assert errors(got) == ["The connection to the Anthropic API closed mid-reply."]


async def test_a_stream_cut_before_any_output_is_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "lost", "fault": "cut", "after": 2}, {"text": "ok"})
    events = await collect(make(llm.url))
    assert text(events) == "ok" and len(llm.chat_requests) == 2


async def test_a_context_overflow_is_not_retried(llm: MockLLM, make: Any) -> None:
    message = "prompt is too long: 210000 tokens > 200000 maximum"
    llm.queue({"fault": "status", "status": 400, "message": message})
    [error] = errors(await collect(make(llm.url)))
    assert error.startswith("The conversation is too long for the model's context window")


# ----- context window ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5", 200_000),
        ("claude-opus-4-1-20250805", 200_000),
        ("claude-3-5-haiku-latest", 200_000),
        ("anthropic/claude-haiku-4-5", 200_000),
        ("claude-instant-1.2", 100_000),
        ("claude-2.0", 100_000),
        ("claude-9-unheard-of", 200_000),
        ("some-gateway-model", None),
    ],
)
async def test_the_window_comes_from_the_table(make: Any, model: str, window: int | None) -> None:
    assert known_window(model) == window
    backend = make("https://api.test", model=model)
    facts = catalog.lookup(model)
    expected = facts.window if facts is not None else window
    assert await backend.context_window() == expected
    assert backend.window_origin == (
        facts.source if facts else "the documented window of its model family" if window else ""
    )


async def test_a_model_of_the_catalogue_gets_its_window_and_says_where_from(make: Any) -> None:
    backend = make("https://api.test", model="claude-sonnet-4-5")
    assert await backend.context_window() == 200_000
    assert backend.window_origin.startswith("the model catalogue (LiteLLM ")


async def test_a_configured_window_wins(make: Any) -> None:
    backend = make("https://api.test", context_window=1_000_000)
    assert await backend.context_window() == 1_000_000
    assert backend.window_origin == "the configuration file"
    assert backend.label == f"anthropic:{MODEL}"
