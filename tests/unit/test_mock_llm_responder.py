"""The mock LLM's programmable responder and the neutral view of a request it reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from acp_server.backends._http import RetryPolicy
from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.backends.ollama import wire as _ollama_wire
from acp_server.backends.openai import wire as _openai_wire
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.messages import (
    ContextOverflow,
    Event,
    Message,
    ModelRequest,
    StreamError,
    TextDelta,
    ToolCall,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    text_message,
)
from tests.support.mock_llm import running_mock_llm
from tests.support.mock_llm.responders import SUMMARY_TEXT, answer_word, file_reader
from tests.support.mock_llm.view import Call, Turn, conversation, tool_names

OPENAI = "/v1/chat/completions"
READ = ToolSpec("read_file", "Read a text file.", {"type": "object", "properties": {}})
FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.002)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(3.0)) as http:
        yield http


def exchange() -> ModelRequest:
    call = ToolCall("c1", "read_file", {"path": "notes.txt"})
    messages = (
        text_message("user", "Read notes.txt"),
        Message("assistant", content=(), tool_calls=(call,)),
        text_message("tool", "Pelicans fly low.", tool_call_id="c1"),
    )
    return ModelRequest(messages, tools=(READ,), system="Be brief.")


def rendered(request: ModelRequest) -> list[dict[str, Any]]:
    return [
        _openai_wire.payload("m", request, stream=True, stream_options=True),
        _anthropic_wire.payload("m", request, max_tokens=100, thinking_budget=None),
        _ollama_wire.payload("m", request),
    ]


# ----- the view ---------------------------------------------------------------------------------


def test_every_dialect_reads_as_the_same_conversation() -> None:
    for body in rendered(exchange()):
        turns = conversation(body)
        assert [t.role for t in turns] == ["system", "user", "assistant", "tool"]
        assert turns[0].text == "Be brief." and turns[1].text == "Read notes.txt"
        assert [(c.name, c.arguments) for c in turns[2].calls] == [
            ("read_file", {"path": "notes.txt"})
        ]
        assert turns[3].text == "Pelicans fly low."
        assert tool_names(body) == ["read_file"]


def test_ids_are_kept_where_the_dialect_has_them() -> None:
    openai, anthropic, ollama = (conversation(b) for b in rendered(exchange()))
    assert openai[2].calls[0].id == "c1" and openai[3].answers == "c1"
    assert anthropic[2].calls[0].id == "c1" and anthropic[3].answers == "c1"
    assert ollama[2].calls == [Call(None, "read_file", {"path": "notes.txt"})]


def test_anthropic_tool_results_come_before_the_users_text() -> None:
    body = {
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "42"},
                    {"type": "text", "text": "and now?"},
                ],
            },
        ]
    }
    assert conversation(body)[1:] == [Turn("tool", "42", answers="t"), Turn("user", "and now?")]


# ----- the responder ----------------------------------------------------------------------------


async def test_the_queue_comes_first_then_the_responder(client: httpx.AsyncClient) -> None:
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"text": f"answer {len(seen)}"}

    async with running_mock_llm(responder=respond) as llm:
        llm.queue({"text": "scripted"})
        texts = []
        for _ in range(3):
            r = await client.post(llm.url + OPENAI, json={"messages": [{"role": "user"}]})
            texts.append(r.json()["choices"][0]["message"]["content"])
        assert texts == ["scripted", "answer 1", "answer 2"]
        assert seen == [r.json for r in llm.chat_requests[1:]]


async def test_a_broken_responder_answers_400_with_the_error(client: httpx.AsyncClient) -> None:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("no such thing")

    async with running_mock_llm(responder=respond) as llm:
        r = await client.post(llm.url + OPENAI, json={"messages": []})
        assert r.status_code == 400 and "KeyError" in r.json()["error"]["message"]


def test_file_reader_decides_from_the_conversation() -> None:
    respond = file_reader()
    request = exchange()
    first = ModelRequest(request.messages[:1], tools=(READ,))
    for body in rendered(first):
        assert respond(body) == {
            "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]
        }
    for body in rendered(request):
        assert respond(body) == {"text": "The file begins with Pelicans."}
    for body in rendered(ModelRequest(request.messages[:1])):
        assert respond(body) == {"text": SUMMARY_TEXT}  # no tools: a summary request
    chat = ModelRequest((text_message("user", "hello"),), tools=(READ,))
    assert respond(rendered(chat)[0]) == {"text": "Done."}
    assert answer_word("  ## Title\nbody") == "Title" and answer_word("") == "nothing"


async def collect(backend: OpenAIBackend, request: ModelRequest) -> list[Event]:
    return [event async for event in backend.stream(request)]


async def test_a_session_through_the_backend_window_and_validator() -> None:
    """The pieces together: the real backend, a responder, a window and the validator."""
    async with running_mock_llm(responder=file_reader(), strict_tools=True) as llm:
        backend = OpenAIBackend(llm.url + "/v1", "m", retry=FAST)
        try:
            ask = ModelRequest((text_message("user", "Read notes.txt"),), tools=(READ,))
            assembler = ToolCallAssembler()
            for event in await collect(backend, ask):
                if isinstance(event, ToolCallDelta):
                    assembler.add(event)
            [call] = assembler.calls("x")
            assert (call.name, call.arguments) == ("read_file", {"path": "notes.txt"})
            answered = ModelRequest(
                (
                    *ask.messages,
                    Message("assistant", tool_calls=(call,)),
                    text_message("tool", "Pelicans fly low.", tool_call_id=call.id),
                ),
                tools=(READ,),
            )
            events = await collect(backend, answered)
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            assert text == "The file begins with Pelicans."
            llm.window = llm.counted[-1] - 1
            [error] = [e for e in await collect(backend, answered) if isinstance(e, StreamError)]
            assert error.overflow == ContextOverflow(llm.window, llm.counted[-1])
            assert llm.invalid == [] and len(llm.overflows) == 1
        finally:
            await backend.aclose()
