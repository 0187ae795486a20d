"""The mock LLM server speaks each dialect's wire shapes and injects its faults on request."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.mock_llm import ERROR_FRAME_TEXT, NO_SCRIPT_TEXT, MockLLM, running_mock_llm

TIMEOUT = httpx.Timeout(3.0)
OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
OLLAMA = "/api/chat"
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        yield http


def parse_sse(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) per SSE event."""
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
        events.append((name, "\n".join(data)))
    return events


def openai_chunks(text: str) -> tuple[list[dict[str, Any]], bool]:
    """The JSON chunks of an OpenAI stream, and whether it ended with [DONE]."""
    datas = [data for _, data in parse_sse(text)]
    done = bool(datas) and datas[-1] == "[DONE]"
    return [json.loads(d) for d in datas if d != "[DONE]"], done


def deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


async def post(
    client: httpx.AsyncClient, llm: MockLLM, path: str, body: dict[str, Any]
) -> httpx.Response:
    return await client.post(llm.url + path, json={"model": "m", "messages": USER, **body})


# --- OpenAI-compatible --------------------------------------------------------------------


async def test_openai_stream_text_thought_and_usage(
    llm: MockLLM, client: httpx.AsyncClient
) -> None:
    llm.queue(
        {
            "thought": "let me think",
            "text": "Hello there world",
            "usage": {"prompt_tokens": 120, "completion_tokens": 7, "cached_tokens": 100},
        }
    )
    r = await post(client, llm, OPENAI, {"stream": True, "stream_options": {"include_usage": True}})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks, done = openai_chunks(r.text)
    assert done
    ds = deltas(chunks)
    assert ds[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("reasoning_content", "") for d in ds) == "let me think"
    assert [d["content"] for d in ds if d.get("content")] == ["Hello", " there", " world"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["usage"] is None for c in chunks[:-1])  # include_usage: null until the last
    assert chunks[-1]["choices"] == []
    usage = chunks[-1]["usage"]
    assert usage["prompt_tokens"] == 120 and usage["completion_tokens"] == 7
    assert usage["total_tokens"] == 127
    assert usage["prompt_tokens_details"] == {"cached_tokens": 100}


async def test_openai_usage_only_when_asked_and_reasoning_field(
    llm: MockLLM, client: httpx.AsyncClient
) -> None:
    llm.queue({"thought": "hmm", "text": "ok", "reasoning_field": "reasoning"})
    chunks, done = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    assert done
    assert all("usage" not in c for c in chunks)
    ds = deltas(chunks)
    assert [d["reasoning"] for d in ds if "reasoning" in d] == ["hmm"]
    assert not any("reasoning_content" in d for d in ds)


async def test_openai_tool_calls_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    args = {"path": "src/main.py", "limit": 40}
    llm.queue({"tool_calls": [{"id": "call_1", "name": "read_file", "arguments": args}]})
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    calls = [d["tool_calls"][0] for d in deltas(chunks) if "tool_calls" in d]
    assert len(calls) >= 3  # id/name delta plus several argument pieces
    assert calls[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": ""},
    }
    assert all("id" not in c and "name" not in c["function"] for c in calls[1:])
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == args
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_openai_parallel_calls_interleave(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {
            "parallel": True,
            "tool_calls": [
                {"id": "a", "name": "one", "arguments": {"x": 1}},
                {"id": "b", "name": "two", "arguments": '{"y": "raw"}'},
            ],
        }
    )
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    calls = [d["tool_calls"][0] for d in deltas(chunks) if "tool_calls" in d]
    order = [c["index"] for c in calls]
    assert order[:4] == [0, 1, 0, 1]
    for index, expected in ((0, {"x": 1}), (1, {"y": "raw"})):
        text = "".join(c["function"]["arguments"] for c in calls if c["index"] == index)
        assert json.loads(text) == expected


async def test_openai_repeat_ids(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {"fault": "repeat_ids", "tool_calls": [{"id": "c9", "name": "ls", "arguments": {"a": 1}}]}
    )
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    calls = [d["tool_calls"][0] for d in deltas(chunks) if "tool_calls" in d]
    assert len(calls) > 2
    assert all(c["id"] == "c9" and c["function"]["name"] == "ls" for c in calls)


async def test_openai_non_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {
            "thought": "t",
            "text": "done",
            "tool_calls": [{"id": "c1", "name": "ls", "arguments": {}}],
            "finish": "tool_calls",
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    )
    r = await post(client, llm, OPENAI, {})
    body = r.json()
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "done"
    assert choice["message"]["reasoning_content"] == "t"
    call = choice["message"]["tool_calls"][0]
    assert call == {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    assert body["usage"]["total_tokens"] == 7


async def test_chunk_words_and_delay(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"text": "a b c d e", "chunk_words": 2, "delay_ms": 20})
    start = time.monotonic()
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    assert time.monotonic() - start >= 0.08
    assert [d["content"] for d in deltas(chunks) if d.get("content")] == ["a b", " c d", " e"]


async def test_deltas_arrive_one_by_one(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"text": "one two", "delay_ms": 80})
    arrivals: dict[str, float] = {}
    async with client.stream(
        "POST", llm.url + OPENAI, json={"messages": USER, "stream": True}
    ) as r:
        async for line in r.aiter_lines():
            for word in ("one", "two", "[DONE]"):
                if word in line:
                    arrivals[word] = time.monotonic()
    # each delta is flushed when written, not buffered until the end of the response
    assert arrivals["two"] - arrivals["one"] >= 0.06
    assert arrivals["[DONE]"] >= arrivals["two"]


# --- Anthropic ----------------------------------------------------------------------------


async def test_anthropic_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {
            "thought": "plan it",
            "text": "Reading now",
            "tool_calls": [{"id": "toolu_1", "name": "read_file", "arguments": {"path": "a"}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 9, "cached_tokens": 60},
        }
    )
    r = await post(client, llm, ANTHROPIC, {"stream": True, "max_tokens": 100})
    events = parse_sse(r.text)
    for name, data in events:
        assert json.loads(data)["type"] == name  # the event name repeats the data's type
    payloads = [json.loads(d) for _, d in events]
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    usage = payloads[0]["message"]["usage"]
    assert usage == {
        "input_tokens": 40,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 60,
        "output_tokens": 1,
    }
    starts = [p["content_block"] for p in payloads if p["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "text", "tool_use"]
    assert starts[2] == {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    by_type: dict[str, list[dict[str, Any]]] = {}
    for p in payloads:
        if p["type"] == "content_block_delta":
            by_type.setdefault(p["delta"]["type"], []).append(p)
    assert "".join(p["delta"]["thinking"] for p in by_type["thinking_delta"]) == "plan it"
    assert [p["delta"]["signature"] for p in by_type["signature_delta"]] == ["sig-1"]
    assert "".join(p["delta"]["text"] for p in by_type["text_delta"]) == "Reading now"
    pieces = [p["delta"]["partial_json"] for p in by_type["input_json_delta"]]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == {"path": "a"}
    assert {p["index"] for p in by_type["input_json_delta"]} == {2}
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"
    assert payloads[-2]["usage"] == {"output_tokens": 9}


@pytest.mark.parametrize(
    ("finish", "openai", "anthropic", "ollama"),
    [
        ("stop", "stop", "end_turn", "stop"),
        ("length", "length", "max_tokens", "length"),
        ("content_filter", "content_filter", "refusal", "stop"),
    ],
)
async def test_finish_mapping(
    llm: MockLLM, client: httpx.AsyncClient, finish: str, openai: str, anthropic: str, ollama: str
) -> None:
    llm.queue(*[{"text": "x", "finish": finish}] * 3)
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    assert chunks[-1]["choices"][0]["finish_reason"] == openai
    events = parse_sse((await post(client, llm, ANTHROPIC, {"stream": True})).text)
    assert json.loads(events[-2][1])["delta"]["stop_reason"] == anthropic
    lines = (await post(client, llm, OLLAMA, {})).text.splitlines()
    assert json.loads(lines[-1])["done_reason"] == ollama


async def test_anthropic_non_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {"thought": "t", "text": "hi", "tool_calls": [{"id": "t1", "name": "ls", "arguments": {}}]}
    )
    body = (await post(client, llm, ANTHROPIC, {"max_tokens": 10})).json()
    assert body["type"] == "message" and body["stop_reason"] == "tool_use"
    assert [b["type"] for b in body["content"]] == ["thinking", "text", "tool_use"]
    assert body["content"][0]["signature"] == "sig-1"
    assert body["content"][2]["input"] == {}


# --- Ollama -------------------------------------------------------------------------------


async def test_ollama_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {
            "thought": "hmm ok",
            "text": "Sure thing",
            "tool_calls": [{"id": "x", "name": "grep", "arguments": {"pattern": "foo"}}],
            "usage": {"prompt_tokens": 33, "completion_tokens": 4},
        }
    )
    r = await post(client, llm, OLLAMA, {"options": {"num_ctx": 8192}})  # stream defaults on
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert all(not line["done"] for line in lines[:-1])
    assert "".join(line["message"].get("thinking", "") for line in lines) == "hmm ok"
    assert "".join(line["message"]["content"] for line in lines) == "Sure thing"
    (with_calls,) = [line for line in lines if "tool_calls" in line["message"]]
    assert with_calls["message"]["tool_calls"] == [
        {"function": {"index": 0, "name": "grep", "arguments": {"pattern": "foo"}}}
    ]
    final = lines[-1]
    assert final["done"] is True and final["done_reason"] == "stop"
    assert final["prompt_eval_count"] == 33 and final["eval_count"] == 4


async def test_ollama_non_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"text": "a b", "finish": "length", "usage": None})
    body = (await post(client, llm, OLLAMA, {"stream": False})).json()
    assert body["message"]["content"] == "a b"
    assert body["done_reason"] == "length"
    assert "prompt_eval_count" not in body


# --- queue, recording, discovery ----------------------------------------------------------


async def test_empty_queue_and_recording(llm: MockLLM, client: httpx.AsyncClient) -> None:
    r = await client.post(
        llm.url + OPENAI,
        json={"messages": USER, "stream": False},
        headers={"Authorization": "Bearer k", "X-Custom": "1"},
    )
    assert r.json()["choices"][0]["message"]["content"] == NO_SCRIPT_TEXT
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    (rec,) = llm.requests
    assert rec.method == "POST" and rec.path == OPENAI
    assert rec.headers["authorization"] == "Bearer k" and rec.headers["x-custom"] == "1"
    assert rec.json == {"messages": USER, "stream": False}
    assert llm.chat_requests == [rec]


async def test_discovery(llm: MockLLM, client: httpx.AsyncClient) -> None:
    models = (await client.get(llm.url + "/v1/models")).json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == "mock-model" and "context_length" not in models["data"][0]
    assert (await client.get(llm.url + "/props")).status_code == 404
    show = (await client.post(llm.url + "/api/show", json={"model": "x"})).json()
    assert "parameters" not in show and "llama.context_length" not in show["model_info"]

    llm.set(context_length=32768, model="qwen")
    models = (await client.get(llm.url + "/v1/models")).json()
    assert models["data"][0] == {
        "id": "qwen",
        "object": "model",
        "created": 0,
        "owned_by": "mock",
        "context_length": 32768,
    }
    props = (await client.get(llm.url + "/props")).json()
    assert props["default_generation_settings"]["n_ctx"] == 32768
    show = (await client.post(llm.url + "/api/show", json={"model": "qwen"})).json()
    assert show["model_info"]["general.architecture"] == "llama"
    assert show["model_info"]["llama.context_length"] == 32768
    assert show["parameters"].split() == ["num_ctx", "32768"]

    llm.set(num_ctx=4096, arch="qwen2")
    show = (await client.post(llm.url + "/api/show", json={"model": "qwen"})).json()
    assert show["model_info"]["qwen2.context_length"] == 32768
    assert show["parameters"].split() == ["num_ctx", "4096"]
    r = await client.get(llm.url + "/nope")
    assert r.status_code == 404 and "error" in r.json()
    assert all(rec.path != OPENAI for rec in llm.requests)


# --- faults -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, OLLAMA])
async def test_status_fault(llm: MockLLM, client: httpx.AsyncClient, path: str) -> None:
    llm.queue({"fault": "status", "status": 429, "retry_after": 2}, {"text": "after"})
    r = await post(client, llm, path, {"stream": True})
    assert r.status_code == 429
    assert r.headers["retry-after"] == "2"
    body = r.json()
    if path == OLLAMA:
        assert isinstance(body["error"], str)
    else:
        assert body["error"]["message"] and body["error"]["type"] == "rate_limit_error"
    if path == ANTHROPIC:
        assert body["type"] == "error"
    assert llm.pending == 1


async def test_status_fault_overloaded_and_custom_body(
    llm: MockLLM, client: httpx.AsyncClient
) -> None:
    llm.queue(
        {"fault": "status", "status": 529}, {"fault": "status", "status": 500, "body": "oops"}
    )
    r = await post(client, llm, ANTHROPIC, {"stream": True})
    assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"
    r = await post(client, llm, OPENAI, {"stream": True})
    assert r.status_code == 500 and r.text == "oops"
    assert r.headers["content-type"].startswith("text/plain")


async def test_html_fault(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "html"})
    r = await post(client, llm, OPENAI, {"stream": True})
    assert r.status_code == 502
    assert r.headers["content-type"].startswith("text/html")
    assert r.text.lstrip().lower().startswith("<!doctype html>")


async def test_cut_chunked_is_a_protocol_error(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "cut", "text": "one two three four five six"})
    seen = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with client.stream(
            "POST", llm.url + OPENAI, json={"messages": USER, "stream": True}
        ) as r:
            async for line in r.aiter_lines():
                seen.append(line)
    assert any('"content": "one"' in line for line in seen)
    assert "data: [DONE]" not in seen


@pytest.mark.parametrize(
    ("path", "terminator"),
    [(OPENAI, "[DONE]"), (ANTHROPIC, "message_stop"), (OLLAMA, '"done": true')],
)
async def test_cut_close_delimited_is_a_clean_eof(
    llm: MockLLM, client: httpx.AsyncClient, path: str, terminator: str
) -> None:
    llm.queue({"fault": "cut", "chunked": False, "text": "one two three four five six"})
    r = await post(client, llm, path, {"stream": True})
    assert r.status_code == 200
    assert "one" in r.text and "six" not in r.text
    assert terminator not in r.text


async def test_cut_non_stream_body_is_short(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "cut", "text": "a whole answer"})
    with pytest.raises(httpx.RemoteProtocolError):
        await post(client, llm, OPENAI, {"stream": False})


async def test_error_frame_openai(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "error_frame", "message": "backend exploded"})
    r = await post(client, llm, OPENAI, {"stream": True})
    assert r.status_code == 200
    chunks, done = openai_chunks(r.text)
    assert not done
    assert chunks == [
        {
            "error": {
                "message": "backend exploded",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }
    ]


async def test_error_frame_anthropic_and_ollama(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "error_frame", "after": 2, "text": "a b"}, {"fault": "error_frame"})
    events = parse_sse((await post(client, llm, ANTHROPIC, {"stream": True})).text)
    assert [n for n, _ in events] == ["message_start", "ping", "error"]
    error = json.loads(events[-1][1])
    assert error["type"] == "error" and error["error"]["type"] == "overloaded_error"
    assert error["error"]["message"]
    lines = (await post(client, llm, OLLAMA, {})).text.splitlines()
    assert [json.loads(line) for line in lines] == [{"error": ERROR_FRAME_TEXT}]


async def test_slow_first_byte(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "slow_first_byte", "seconds": 1.0}, {"text": "fast"})
    with pytest.raises(httpx.ReadTimeout):
        await client.post(llm.url + OPENAI, json={"messages": USER, "stream": True}, timeout=0.1)
    chunks, done = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    assert done and any(d.get("content") == "fast" for d in deltas(chunks))


async def test_stall_mid_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "stall", "seconds": 1.0, "after": 2, "text": "one two three"})
    seen = []
    with pytest.raises(httpx.ReadTimeout):
        async with client.stream(
            "POST",
            llm.url + OPENAI,
            json={"messages": USER, "stream": True},
            timeout=httpx.Timeout(3.0, read=0.15),
        ) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                seen.append(line)
    assert any('"content": "one"' in line for line in seen)
    assert not any("two" in line for line in seen)


async def test_stall_resumes(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "stall", "seconds": 0.1, "after": 1, "text": "a b"})
    start = time.monotonic()
    chunks, done = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    assert time.monotonic() - start >= 0.1
    assert done and "".join(d.get("content", "") for d in deltas(chunks)) == "a b"


async def test_empty_stream(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue({"fault": "empty_stream", "text": "never"})
    r = await post(client, llm, OPENAI, {"stream": True, "tools": []})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.content == b""


async def test_reject_null_content(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {"fault": "reject_null_content", "text": "first"},
        {"fault": "reject_null_content", "text": "second"},
    )
    history = [*USER, {"role": "assistant", "content": None, "tool_calls": []}]
    r = await client.post(llm.url + OPENAI, json={"messages": history})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "content must be a string"
    r = await client.post(llm.url + OPENAI, json={"messages": USER})
    # the rejection consumed the first response; a clean history is served normally
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "second"


async def test_reject_stream_options_is_not_consumed(
    llm: MockLLM, client: httpx.AsyncClient
) -> None:
    llm.queue({"fault": "reject_stream_options", "text": "served"}, {"text": "next"})
    asked = {"stream": True, "stream_options": {"include_usage": True}}
    r = await post(client, llm, OPENAI, asked)
    assert r.status_code == 400 and "stream_options" in r.json()["error"]["message"]
    assert llm.pending == 2
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    assert "".join(d.get("content", "") for d in deltas(chunks)) == "served"
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, asked)).text)
    assert "".join(d.get("content", "") for d in deltas(chunks)) == "next"


async def test_inline_tool_call(llm: MockLLM, client: httpx.AsyncClient) -> None:
    llm.queue(
        {
            "fault": "inline_tool_call",
            "text": "Let me look.",
            "name": "read_file",
            "arguments": {"path": "a.py"},
        }
    )
    chunks, _ = openai_chunks((await post(client, llm, OPENAI, {"stream": True})).text)
    pieces = [d["content"] for d in deltas(chunks) if d.get("content")]
    content = "".join(pieces)
    assert content.startswith("Let me look.<tool_call>")
    inner = content.split("<tool_call>")[1].split("</tool_call>")[0]
    assert json.loads(inner) == {"name": "read_file", "arguments": {"path": "a.py"}}
    assert not any("<tool_call>" in p or "</tool_call>" in p for p in pieces)
    assert not any("tool_calls" in d for d in deltas(chunks))
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


# --- lifecycle ----------------------------------------------------------------------------


async def test_close_cuts_open_streams_quickly() -> None:
    async with running_mock_llm() as server, httpx.AsyncClient(timeout=TIMEOUT) as http:
        server.queue({"fault": "stall", "seconds": 30, "after": 1, "text": "a b"})
        async with http.stream(
            "POST", server.url + OPENAI, json={"messages": USER, "stream": True}
        ) as r:
            lines = r.aiter_lines()
            await anext(lines)
            start = time.monotonic()
            await asyncio.wait_for(server.close(), 2)
            assert time.monotonic() - start < 1
            with pytest.raises(httpx.RemoteProtocolError):
                async for _ in lines:
                    pass


async def test_mock_llm_class_directly() -> None:
    server = MockLLM()
    await server.start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            r = await http.get(server.url + "/v1/models")
            assert r.status_code == 200
    finally:
        await server.close()
