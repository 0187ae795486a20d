"""The OpenAI Responses backend against the strict mock (real TCP); MockTransport for odd shapes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from acp_server.backends._http import RetryPolicy
from acp_server.backends.images import TOOL_IMAGES_INTRO
from acp_server.backends.responses.backend import ResponsesBackend, needs_responses, reasons
from acp_server.messages import (
    Event,
    Finish,
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
MODEL = "gpt-5"
KEY = "openai-responses"


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm(strict_dialect=True) as server:
        yield server


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., ResponsesBackend]]:
    """Builds backends (against the mock server or a MockTransport) and closes them after."""
    made: list[ResponsesBackend] = []

    def build(url: str, **kw: Any) -> ResponsesBackend:
        kw.setdefault("retry", FAST)
        model = kw.pop("model", MODEL)
        made.append(ResponsesBackend(f"{url}/v1", model, kw.pop("api_key", "sk-test"), **kw))
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


async def collect(backend: ResponsesBackend, request: ModelRequest = ASK) -> list[Event]:
    return [event async for event in backend.stream(request)]


def text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def errors(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, StreamError)]


def assistant_from(events: list[Event]) -> Message:
    """The assistant message the agent loop records from a round's events."""
    extra: dict[str, Any] = {}
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, PrivateData):
            extra.update(event.data)
        elif isinstance(event, ToolCallDelta):
            assembler.add(event)
    content = (TextPart(text(events)),) if text(events) else ()
    return Message("assistant", content, tuple(assembler.calls("unused_")), extra=extra)


def reading(path: str = "a.py", **more: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}], **more}


async def tool_round(backend: ResponsesBackend, messages: tuple[Message, ...]) -> Message:
    """One round that calls read_file; the history grows by the reply and its result."""
    reply = assistant_from(await collect(backend, ModelRequest(messages, (READ,))))
    assert reply.tool_calls, reply
    return reply


# ----- the request ----------------------------------------------------------------------------


async def test_the_request_body(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "ok"})
    request = ModelRequest(
        (text_message("user", "hi"),), (READ,), system="Be brief.", max_tokens=500
    )
    events = await collect(make(llm.url), request)
    assert text(events) == "ok" and events[-1] == Finish("stop")
    (sent,) = llm.chat_requests
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json == {
        "model": MODEL,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "instructions": "Be brief.",
        "tools": [
            {
                "type": "function",
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
        "tool_choice": "auto",
        "max_output_tokens": 500,
        "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "stream": True,
    }
    assert llm.invalid == []


async def test_a_tiny_output_cap_is_raised_to_the_apis_least(llm: MockLLM, make: Any) -> None:
    await collect(make(llm.url), ModelRequest(ASK.messages, max_tokens=4))
    assert llm.chat_requests[0].json["max_output_tokens"] == 16
    assert llm.invalid == []


@pytest.mark.parametrize(("level", "effort"), [("high", "high"), ("off", "none"), ("on", None)])
async def test_a_thought_level_becomes_the_reasoning_effort(
    llm: MockLLM, make: Any, level: str, effort: str | None
) -> None:
    await collect(make(llm.url), ModelRequest(ASK.messages, thought_level=level))
    reasoning = llm.chat_requests[0].json["reasoning"]
    assert reasoning.get("effort") == effort and reasoning["summary"] == "auto"


async def test_a_model_that_does_not_reason_is_not_asked_to(llm: MockLLM, make: Any) -> None:
    await collect(make(llm.url, model="gpt-4.1"), ModelRequest(ASK.messages, thought_level="high"))
    body = llm.chat_requests[0].json
    assert "reasoning" not in body and "include" not in body
    assert llm.invalid == []


async def test_images_system_messages_and_image_tool_results(llm: MockLLM, make: Any) -> None:
    png = ImagePart("iVBORw0KGgo=", "image/png")
    call = ToolCall("call_1", "read_file", {"path": "a.png"})
    messages = (
        text_message("system", "Also be kind."),
        Message("user", (TextPart("look"), png)),
        Message("assistant", (), (call,)),
        Message("tool", (TextPart("the image:"), png), tool_call_id="call_1"),
    )
    await collect(make(llm.url), ModelRequest(messages, (READ,)))
    items = llm.chat_requests[0].json["input"]
    assert items[0] == {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Also be kind."}],
    }
    assert items[1]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,iVBORw0KGgo=",
    }
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "read_file",
        "arguments": '{"path": "a.png"}',
    }
    # A function_call_output is text: the image follows the results in a user message.
    assert items[3]["output"] == "the image:\n[image (image/png): attached below]"
    assert items[4] == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": TOOL_IMAGES_INTRO},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
        ],
    }
    assert llm.invalid == []  # the strict mock takes it


# ----- reasoning items ------------------------------------------------------------------------


async def test_reasoning_items_come_back_in_order_on_every_later_round(
    llm: MockLLM, make: Any
) -> None:
    """Three tool rounds of one turn: every later request carries every earlier round's
    reasoning items, each on its own, in order, before its call; the strict mock accepts each."""
    llm.queue(
        reading("a.py", thought="First a."),
        reading("b.py", thought="Then b.", text="Now b."),
        reading("c.py"),
        {"text": "done"},
    )
    backend = make(llm.url)
    history: tuple[Message, ...] = ASK_TOOLS.messages
    for _ in range(3):
        reply = await tool_round(backend, history)
        result = text_message("tool", "x = 1", tool_call_id=reply.tool_calls[0].id)
        history = (*history, reply, result)
    assert text(await collect(backend, ModelRequest(history, (READ,)))) == "done"
    assert llm.invalid == []
    last = llm.chat_requests[-1].json["input"]
    kinds = [(item["type"], item.get("id") or item.get("call_id")) for item in last]
    assert [k for k in kinds if k[0] == "reasoning"] == [
        ("reasoning", f"rs_mock{n}") for n in range(1, 7)
    ]
    first_call = next(n for n, item in enumerate(last) if item["type"] == "function_call")
    assert [item["type"] for item in last[1 : first_call + 1]] == [
        "reasoning",
        "reasoning",
        "function_call",
    ]
    assert last[1]["summary"] == [{"type": "summary_text", "text": "First a."}]
    assert last[1]["encrypted_content"] == "gAAAA-gpt-5-1"
    assert "status" not in last[1]


async def test_the_kept_items_are_private_data_of_the_model(llm: MockLLM, make: Any) -> None:
    llm.queue(reading(thought="Hm.", text="Reading."))
    reply = await tool_round(make(llm.url), ASK_TOOLS.messages)
    kept = reply.extra[KEY]
    assert kept["model"] == MODEL
    assert [item["type"] for item in kept["items"]] == [
        "reasoning",
        "reasoning",
        "message",
        "function_call",
    ]
    assert reply.text == "Reading."


async def test_no_private_data_without_tool_calls(llm: MockLLM, make: Any) -> None:
    llm.queue({"thought": "Easy.", "text": "Hi."})
    events = await collect(make(llm.url))
    assert not any(isinstance(e, PrivateData) for e in events)
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "Easy."


async def test_items_of_another_model_are_not_resent(llm: MockLLM, make: Any) -> None:
    llm.queue(reading(thought="Hm."))
    reply = await tool_round(make(llm.url), ASK_TOOLS.messages)
    result = text_message("tool", "x", tool_call_id=reply.tool_calls[0].id)
    other = make(llm.url, model="gpt-5-mini")
    await collect(other, ModelRequest((*ASK_TOOLS.messages, reply, result), (READ,)))
    sent = llm.chat_requests[-1].json["input"]
    assert not any(item["type"] == "reasoning" for item in sent)


async def test_the_strict_mock_refuses_a_round_that_lost_its_reasoning(
    llm: MockLLM, make: Any
) -> None:
    """The check the e2e sessions rely on can fail: the reply without its kept items."""
    llm.queue(reading(thought="Hm."), {"text": "done"})
    backend = make(llm.url)
    reply = await tool_round(backend, ASK_TOOLS.messages)
    bare = Message("assistant", reply.content, reply.tool_calls)
    result = text_message("tool", "x", tool_call_id=reply.tool_calls[0].id)
    events = await collect(backend, ModelRequest((*ASK_TOOLS.messages, bare, result), (READ,)))
    assert "without its reasoning items" in errors(events)[0]
    assert len(llm.invalid) == 1


# ----- the stream -----------------------------------------------------------------------------


async def test_text_thought_and_usage_with_cached_tokens(llm: MockLLM, make: Any) -> None:
    llm.queue(
        {"thought": "Think.", "text": "Hello there.", "usage": {"prompt_tokens": 90,
         "completion_tokens": 7, "cached_tokens": 64}}
    )  # fmt: skip
    events = await collect(make(llm.url))
    assert text(events) == "Hello there."
    assert Usage(prompt_tokens=90, completion_tokens=7, cached_tokens=64) in events
    assert events[-1] == Finish("stop")


async def test_a_reply_cut_at_max_output_tokens(llm: MockLLM, make: Any) -> None:
    llm.queue({"text": "Half of it", "finish": "length"})
    events = await collect(make(llm.url))
    assert text(events) == "Half of it" and events[-1] == Finish("length")


async def test_summary_parts_are_separate_paragraphs_and_whole_arguments_count(
    make: Any,
) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "read_file"}
    transport = sse_reply(
        {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "One."},
        {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 1},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Two."},
        {"type": "response.output_item.done", "output_index": 1,
         "item": {**item, "arguments": '{"path": "z"}'}},
        {"type": "response.completed", "response": {"status": "completed"}},
    )  # fmt: skip
    events = await collect(make("http://mock", transport=transport), ASK_TOOLS)
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "One.\n\nTwo."
    assert assistant_from(events).tool_calls == (ToolCall("call_9", "read_file", {"path": "z"}),)
    assert events[-1] == Finish("tool_calls")


async def test_a_failed_response_and_a_refusal(make: Any) -> None:
    error = {"code": "invalid_prompt", "message": "Invalid prompt: flagged."}
    failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
    events = await collect(make("http://mock", transport=sse_reply(failed)))
    assert errors(events) == ["The model server reported an error: Invalid prompt: flagged."]
    refusal = sse_reply(
        {"type": "response.refusal.delta", "output_index": 0, "delta": "I can't."},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    events = await collect(make("http://mock", transport=refusal))
    assert text(events) == "I can't." and events[-1] == Finish("refusal")


async def test_a_stream_that_ends_without_the_response_end(make: Any) -> None:
    cut = sse_reply({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"})
    events = await collect(make("http://mock", transport=cut))
    assert "closed mid-reply" in errors(events)[0]


async def test_a_server_error_event_before_output_is_retried(llm: MockLLM, make: Any) -> None:
    llm.queue({"fault": "error_frame", "message": "The server had an error."}, {"text": "ok"})
    events = await collect(make(llm.url))
    assert any(isinstance(e, Notice) for e in events) and text(events) == "ok"


async def test_an_overflow_is_flagged_and_not_retried(llm: MockLLM, make: Any) -> None:
    llm.window = 10
    events = await collect(make(llm.url))
    (error,) = [e for e in events if isinstance(e, StreamError)]
    assert error.overflow is not None and len(llm.chat_requests) == 1


async def test_refused_reasoning_summaries_are_not_asked_for_again(make: Any) -> None:
    bodies: list[dict[str, Any]] = []
    done = 'event: response.completed\ndata: {"type": "response.completed"}\n\n'

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if "summary" in bodies[-1]["reasoning"]:
            message = "Your organization must be verified to generate reasoning summaries."
            error = {
                "message": message,
                "type": "invalid_request_error",
                "param": "reasoning.summary",
            }
            return httpx.Response(400, json={"error": error})
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=done)

    backend = make("http://mock", transport=httpx.MockTransport(answer))
    assert (await collect(backend))[-1] == Finish("stop")
    assert (await collect(backend))[-1] == Finish("stop")
    assert ["summary" in b["reasoning"] for b in bodies] == [True, False, False]


# ----- choosing it, and its window ------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-5", True), ("gpt-5.1-codex", True), ("o3", True), ("o4-mini", True),
     ("openai/o1-pro", True), ("gpt-5-chat-latest", False), ("gpt-4.1", False),
     ("gpt-4o", False), ("o", False), ("omni-moderation", False)],
)  # fmt: skip
def test_which_models_reason(model: str, expected: bool) -> None:
    assert reasons(model) is expected


def test_only_openais_own_api_switches_on_its_own() -> None:
    assert needs_responses("https://api.openai.com/v1", "gpt-5")
    assert not needs_responses("https://api.openai.com/v1", "gpt-4.1")
    assert not needs_responses("http://127.0.0.1:8080/v1", "gpt-5")


async def test_the_window_configured_else_reported(llm: MockLLM, make: Any) -> None:
    assert await make(llm.url, context_window=400_000).context_window() == 400_000
    llm.set(model=MODEL, context_length=272_000)
    assert await make(llm.url).context_window() == 272_000
