"""The OpenAI-compatible backend against recorded server behaviour, through httpx.MockTransport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from acp_server.backends._http import RetryPolicy
from acp_server.backends.openai.backend import OpenAIBackend
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

BASE = "http://llm.test/v1"
FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002, retry_after_cap=0.01)
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})
ASK = ModelRequest(messages=(text_message("user", "hi"),), system="Be brief.")
ASK_TOOLS = ModelRequest(messages=(text_message("user", "read a.py"),), tools=(READ,))

Reply = httpx.Response | Exception


class Server:
    """Answers queued responses per path; records every request."""

    def __init__(self, *replies: Reply, **by_path: Reply) -> None:
        self.replies = list(replies)
        self.by_path = by_path
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        key = request.url.path.strip("/").replace("/", "_")
        reply = self.by_path[key] if key in self.by_path else self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.method == "POST"]


@pytest.fixture
async def backend() -> AsyncIterator[Callable[..., tuple[OpenAIBackend, Server]]]:
    made: list[OpenAIBackend] = []

    def make(*replies: Reply, **kw: Any) -> tuple[OpenAIBackend, Server]:
        by_path = kw.pop("by_path", {})
        server = Server(*replies, **by_path)
        kw.setdefault("retry", FAST)
        made.append(
            OpenAIBackend(BASE, "m1", transport=httpx.MockTransport(server), **kw),
        )
        return made[-1], server

    yield make
    for item in made:
        await item.aclose()


def sse(*chunks: dict[str, Any] | str, done: bool = True) -> httpx.Response:
    frames = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    if done:
        frames.append("data: [DONE]\n\n")
    headers = {"content-type": "text/event-stream"}
    return httpx.Response(200, headers=headers, content="".join(frames).encode())


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    details = {"cached_tokens": cached}
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": {**counts, "prompt_tokens_details": details}}


def call(index: int, id: str | None = None, name: str | None = None, args: str = "") -> Any:
    function: dict[str, Any] = {"arguments": args}
    if name:
        function["name"] = name
    item = {"index": index, "type": "function", "function": function}
    return {**item, "id": id} if id else item


async def collect(backend: OpenAIBackend, request: ModelRequest = ASK) -> list[Event]:
    return [event async for event in backend.stream(request)]


def text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls(events: list[Event]) -> list[tuple[str, str, dict[str, Any]]]:
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assembler.add(event)
    return [(c.id, c.name, c.arguments) for c in assembler.calls("gen_")]


def errors(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, StreamError)]


# ----- rendering --------------------------------------------------------------------------------


async def test_the_request_body(backend: Any) -> None:
    history = (
        Message("user", (TextPart("what is this?"), ImagePart("aGk=", "image/png"))),
        Message(
            "assistant",
            thought="secret musing",
            tool_calls=(ToolCall("call_1", "read_file", {"path": "a.py"}),),
        ),
        text_message("tool", "print(1)", tool_call_id="call_1"),
    )
    b, server = backend(sse(delta(content="ok"), finish("stop")), api_key="sk-test")
    request = ModelRequest(messages=history, tools=(READ,), system="Be brief.", max_tokens=99)
    await collect(b, request)
    body = server.bodies()[0]
    assert server.requests[0].url == f"{BASE}/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "m1" and body["max_tokens"] == 99
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                          "parameters": READ.parameters}}
    ]  # fmt: skip
    assert body["tool_choice"] == "auto"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
        ]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
    ]  # fmt: skip


async def test_no_tools_no_tool_choice(backend: Any) -> None:
    b, server = backend(sse(delta(content="ok"), finish("stop")))
    await collect(b)
    body = server.bodies()[0]
    assert "tools" not in body and "tool_choice" not in body and "max_tokens" not in body
    assert "null" not in server.requests[0].content.decode()


# ----- streamed replies -------------------------------------------------------------------------


async def test_text_reasoning_and_usage(backend: Any) -> None:
    b, _ = backend(
        sse(
            delta(role="assistant", content=None),
            delta(reasoning_content="Think"),
            delta(reasoning="ing."),
            delta(content="Hel"),
            delta(content="lo"),
            finish("stop"),
            usage(120, 7, cached=100),
        )
    )
    events = await collect(b)
    assert events == [
        ThoughtDelta("Think"),
        ThoughtDelta("ing."),
        TextDelta("Hel"),
        TextDelta("lo"),
        Usage(120, 7, 100),
        Finish("stop"),
    ]


async def test_usage_repeated_in_every_chunk_is_reported_once(backend: Any) -> None:
    running = [{**delta(content=c), "usage": usage(9, n)["usage"]} for n, c in enumerate("abc")]
    b, _ = backend(sse(*running, {**finish("stop"), "error": None, "usage": None}))
    events = await collect(b)
    assert [e for e in events if isinstance(e, Usage)] == [Usage(9, 2)]
    assert text(events) == "abc" and events[-1] == Finish("stop")


async def test_parallel_tool_calls_are_assembled_by_index(backend: Any) -> None:
    b, _ = backend(
        sse(
            delta(tool_calls=[call(0, "call_a", "read_file", "")]),
            delta(tool_calls=[call(1, "call_b", "list_dir", '{"pa')]),
            delta(tool_calls=[call(0, args='{"path": ')]),
            delta(tool_calls=[call(0, args='"a.py"}'), call(1, args='th": "."}')]),
            finish("tool_calls"),
        )
    )
    events = await collect(b, ASK_TOOLS)
    assert calls(events) == [
        ("call_a", "read_file", {"path": "a.py"}),
        ("call_b", "list_dir", {"path": "."}),
    ]
    assert events[-1] == Finish("tool_calls")


async def test_llama_cpp_repeating_id_and_name_in_every_delta(backend: Any) -> None:
    fragments = ['{"path"', ': "a.py"', "}"]
    chunks = [delta(tool_calls=[call(0, "abc", "read_file", f)]) for f in fragments]
    b, _ = backend(sse(*chunks, finish("tool_calls")))
    events = await collect(b, ASK_TOOLS)
    assert calls(events) == [("abc", "read_file", {"path": "a.py"})]


async def test_a_new_id_at_a_used_index_is_a_new_call(backend: Any) -> None:
    b, _ = backend(
        sse(
            delta(tool_calls=[call(0, "call_a", "read_file", '{"path": "a"}')]),
            delta(tool_calls=[call(0, "call_b", "read_file", '{"path": "b"}')]),
            finish("tool_calls"),
        )
    )
    events = await collect(b, ASK_TOOLS)
    assert [c[0] for c in calls(events)] == ["call_a", "call_b"]


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("max_tokens", "length"),
        ("content_filter", "refusal"),
        ("refusal", "refusal"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("something_new", "stop"),
    ],
)
async def test_finish_reasons(backend: Any, wire: str, neutral: FinishReason) -> None:
    b, _ = backend(sse(delta(content="x"), finish(wire)))
    assert (await collect(b))[-1] == Finish(neutral)


async def test_a_reasoning_only_reply_cut_by_length(backend: Any) -> None:
    b, _ = backend(sse(delta(reasoning_content="Let me think about"), finish("length")))
    events = await collect(b)
    assert events == [ThoughtDelta("Let me think about"), Finish("length")]


async def test_done_without_a_finish_reason_still_finishes(backend: Any) -> None:
    b, _ = backend(sse(delta(content="ok")))
    assert (await collect(b))[-1] == Finish("stop")


# ----- errors -----------------------------------------------------------------------------------


async def test_the_error_envelope_message_is_shown(backend: Any) -> None:
    b, server = backend(httpx.Response(404, json={"error": {"message": "model 'm1' not found"}}))
    events = await collect(b)
    assert errors(events) == ["The model server answered HTTP 404 Not Found: model 'm1' not found"]
    assert len(server.requests) == 1


async def test_an_html_502_becomes_its_status(backend: Any) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"
    b, server = backend(*[httpx.Response(502, html=page) for _ in range(3)])
    events = await collect(b)
    [message] = errors(events)
    assert message.startswith("The model server answered HTTP 502 Bad Gateway")
    assert "<" not in message and "nginx" not in message
    assert len(server.requests) == 3


async def test_an_error_frame_inside_a_200_stream(backend: Any) -> None:
    b, server = backend(
        sse(delta(content="Partial"), {"error": {"message": "upstream exploded", "code": 500}})
    )
    events = await collect(b)
    assert text(events) == "Partial"
    assert errors(events) == ["The model server reported an error: upstream exploded"]
    assert len(server.requests) == 1  # the user saw output: not retried


async def test_a_transient_error_frame_before_any_output_is_retried(backend: Any) -> None:
    b, _ = backend(
        sse({"error": {"type": "overloaded_error", "message": "Overloaded"}}, done=False),
        sse(delta(content="ok"), finish("stop")),
    )
    events = await collect(b)
    assert isinstance(events[0], Notice) and "overloaded" in events[0].text
    assert text(events) == "ok" and events[-1] == Finish("stop")


async def test_a_429_with_retry_after_then_success(backend: Any) -> None:
    limited = httpx.Response(429, headers={"retry-after": "20"}, json={"error": {"message": "x"}})
    b, server = backend(limited, sse(delta(content="ok"), finish("stop")))
    events = await collect(b)
    assert events[0] == Notice(
        "The model server answered HTTP 429 (rate limited); retrying in 0.01 s (attempt 2 of 3)."
    )
    assert events[1:] == [TextDelta("ok"), Finish("stop")]
    assert len(server.requests) == 2


async def test_retries_exhausted(backend: Any) -> None:
    b, server = backend(*[httpx.Response(503) for _ in range(3)])
    events = await collect(b)
    assert [type(e) for e in events] == [Notice, Notice, StreamError]
    assert "gave up after 3 attempts" in errors(events)[0]
    assert len(server.requests) == 3


async def test_a_connection_error_then_success(backend: Any) -> None:
    b, _ = backend(httpx.ConnectError("refused"), sse(delta(content="up"), finish("stop")))
    events = await collect(b)
    assert isinstance(events[0], Notice) and text(events) == "up"


async def test_401_is_not_retried_and_names_the_key_variable(backend: Any) -> None:
    refused = httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})
    b, server = backend(refused, api_key_env="OPENAI_API_KEY")
    [message] = errors(await collect(b))
    assert "OPENAI_API_KEY" in message and "Incorrect API key provided" in message
    assert len(server.requests) == 1


async def test_a_context_overflow_is_not_retried(backend: Any) -> None:
    too_long = {"error": {"message": "This model's maximum context length is 4096 tokens."}}
    b, server = backend(httpx.Response(400, json=too_long))
    [message] = errors(await collect(b))
    assert "too long for the model's context window" in message
    assert len(server.requests) == 1


async def test_a_stream_closed_mid_reply(backend: Any) -> None:
    b, server = backend(sse(delta(content="Half a sen"), done=False))
    events = await collect(b)
    assert text(events) == "Half a sen"
    assert errors(events) == ["The connection to the model server closed mid-reply."]
    assert len(server.requests) == 1


async def test_a_stream_closed_before_any_output_is_retried(backend: Any) -> None:
    b, server = backend(
        sse(delta(role="assistant"), done=False), sse(delta(content="ok"), finish("stop"))
    )
    events = await collect(b)
    assert isinstance(events[0], Notice) and "closed the connection" in events[0].text
    assert text(events) == "ok" and len(server.requests) == 2


# ----- server quirks ----------------------------------------------------------------------------


async def test_stream_options_refused_once_then_never_sent_again(backend: Any) -> None:
    refusal = {"error": {"message": "Unrecognized request argument supplied: stream_options"}}
    b, server = backend(
        httpx.Response(400, json=refusal),
        sse(delta(content="one"), finish("stop")),
        sse(delta(content="two"), finish("stop")),
    )
    assert text(await collect(b)) == "one"
    assert text(await collect(b)) == "two"
    assert ["stream_options" in body for body in server.bodies()] == [True, False, False]
    assert not b.sends_stream_options


async def test_an_empty_stream_is_asked_again_without_streaming(backend: Any) -> None:
    completion = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "Need the file.",
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9},
    }
    b, server = backend(sse(done=False), httpx.Response(200, json=completion))
    events = await collect(b, ASK_TOOLS)
    assert events[0] == ThoughtDelta("Need the file.")
    assert calls(events) == [("call_9", "read_file", {"path": "a.py"})]
    assert Usage(50, 9) in events and events[-1] == Finish("tool_calls")
    second = server.bodies()[1]
    assert second["stream"] is False and "stream_options" not in second


# ----- inline tool calls ------------------------------------------------------------------------


async def test_inline_calls_split_across_deltas_never_reach_the_text(backend: Any) -> None:
    pieces = ["Reading.<", "tool_ca", 'll>{"name": "read_file", ', '"arguments": {"path": "a.py"}}']
    pieces += ["</tool", "_call>"]
    b, _ = backend(
        sse(*(delta(content=p) for p in pieces), finish("stop")),
        sse(*(delta(content=p) for p in pieces), finish("stop")),
    )
    first = await collect(b, ASK_TOOLS)
    assert [e.text for e in first if isinstance(e, TextDelta)] == ["Reading."]
    assert calls(first) == [("call_recovered_0", "read_file", {"path": "a.py"})]
    assert first[-1] == Finish("tool_calls")
    second = await collect(b, ASK_TOOLS)
    assert calls(second) == [("call_recovered_1", "read_file", {"path": "a.py"})]


async def test_inline_calls_in_a_non_streamed_reply(backend: Any) -> None:
    content = 'Sure.\n<tool_call>{"name": "read_file", "parameters": {"path": "b"}}</tool_call>'
    completion = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
    b, _ = backend(sse(done=False), httpx.Response(200, json=completion))
    events = await collect(b, ASK_TOOLS)
    assert text(events) == "Sure.\n"
    assert calls(events) == [("call_recovered_0", "read_file", {"path": "b"})]


async def test_a_malformed_inline_call_is_retried_once_then_given_up(backend: Any) -> None:
    bad = '<tool_call>{"name": "read_file", "arguments": {"path": }</tool_call>'
    b, server = backend(
        sse(delta(content="Let me look."), delta(content=bad), finish("stop")),
        sse(delta(content=bad), finish("stop")),
    )
    events = await collect(b, ASK_TOOLS)
    assert len(server.requests) == 2
    retry = server.bodies()[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Let me look." + bad}
    assert retry[-1]["role"] == "user" and "<tool_call>" in retry[-1]["content"]
    assert text(events) == "Let me look." and calls(events) == []
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert "asking it to try again" in notices[0] and "it was not run" in notices[1]
    assert events[-1] == Finish("stop")


# ----- context window ---------------------------------------------------------------------------

VLLM_MODELS = {
    "object": "list",
    "data": [
        {"id": "other", "object": "model", "max_model_len": 4096},
        {"id": "m1", "object": "model", "owned_by": "vllm", "max_model_len": 32768},
    ],
}
LLAMA_MODELS = {
    "models": [{"name": "qwen.gguf", "model": "qwen.gguf"}],
    "object": "list",
    "data": [{"id": "qwen.gguf", "object": "model", "meta": {"n_ctx_train": 131072}}],
}
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 16384}, "total_slots": 1}


async def test_window_from_models(backend: Any) -> None:
    b, server = backend(by_path={"v1_models": httpx.Response(200, json=VLLM_MODELS)})
    assert await b.context_window() == 32768
    assert await b.context_window() == 32768
    assert len(server.requests) == 1  # cached


async def test_window_from_openrouter_style_context_length(backend: Any) -> None:
    models = {"data": [{"id": "m1", "context_length": 200000}]}
    b, _ = backend(by_path={"v1_models": httpx.Response(200, json=models)})
    assert await b.context_window() == 200000


async def test_window_from_llama_cpp_props(backend: Any) -> None:
    b, server = backend(
        by_path={
            "v1_models": httpx.Response(200, json=LLAMA_MODELS),
            "props": httpx.Response(200, json=LLAMA_PROPS),
        }
    )
    assert await b.context_window() == 16384
    assert [str(r.url) for r in server.requests] == [f"{BASE}/models", "http://llm.test/props"]


async def test_window_unknown_is_none_and_never_raises(backend: Any) -> None:
    b, _ = backend(
        by_path={
            "v1_models": httpx.Response(200, json={"data": []}),
            "props": httpx.Response(404, text="not found"),
        }
    )
    assert await b.context_window() is None
    down, server = backend(by_path={"v1_models": httpx.ConnectError("x"), "props": ValueError()})
    assert await down.context_window() is None
    assert await down.context_window() is None
    assert len(server.requests) == 4  # nobody answered: asked again next time


def test_label(backend: Any) -> None:
    b, _ = backend()
    assert b.label == "openai:m1"
