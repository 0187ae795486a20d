"""Switching models mid-session, across vendors, through the real `acp-server` over real pipes.

The mock LLM runs with `strict_dialect=True`: each endpoint refuses what its real API refuses
(OpenAI tool pairing, Anthropic alternation, tool_result pairing and thinking signatures of the
requested model, Ollama's native shapes) and records why in `invalid`. Every frame the server
writes is checked against the official ACP schema by the `conformance` fixture, config options
included. Discovery is off (ACP_SERVER_DISCOVER=0) except where a test is about it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_backends_e2e import Start, endpoint_env, message_text, updates_of
from tests.support.mock_llm import MockLLM, running_mock_llm
from tests.support.raw import Frame, RawServer

THREE = ("openai:model-a", "anthropic:claude-b", "ollama:model-c")
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)


@pytest.fixture
async def strict() -> AsyncIterator[MockLLM]:
    async with running_mock_llm(strict_dialect=True) as server:
        yield server


def env_for(mock: MockLLM, **extra: str) -> dict[str, str]:
    return endpoint_env("openai", mock, ACP_SERVER_DISCOVER="0", **extra)


async def start(
    server_factory: Start, mock: MockLLM, models: tuple[str, ...], **env: str
) -> RawServer:
    args = [part for model in models for part in ("--model", model)]
    server: RawServer = await server_factory(*args, env=env_for(mock, **env))
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return server


async def new_session(server: RawServer, cwd: Path) -> tuple[str, Frame]:
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return str(answer["result"]["sessionId"]), answer["result"]


async def prompt(
    server: RawServer, session: str, *blocks: dict[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    req = await server.call("session/prompt", {"sessionId": session, "prompt": list(blocks)})
    answer, before = await server.response(req, timeout=30)
    assert "result" in answer, answer
    return str(answer["result"]["stopReason"]), updates_of(before)


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


async def choose(server: RawServer, session: str, config_id: str, value: str) -> Frame:
    params = {"sessionId": session, "configId": config_id, "value": value}
    return await server.request("session/set_config_option", params)


def option(options: list[dict[str, Any]], config_id: str) -> dict[str, Any] | None:
    return next((o for o in options if o["id"] == config_id), None)


def tool_turn(path: str, thought: str = "") -> list[dict[str, Any]]:
    """A scripted prompt: read `path`, then answer. The call id is unique, as the vendors'
    own are (the mock numbers its made-up ids from 1 in every reply)."""
    made = {"id": f"toolu_{path.replace('.', '_')}", "name": "read_file"}
    call: dict[str, Any] = {"tool_calls": [{**made, "arguments": {"path": path}}]}
    return [{**call, "thought": thought} if thought else call, {"text": f"Read {path}."}]


def files(cwd: Path, *names: str) -> None:
    for name in names:
        (cwd / name).write_text(f"contents of {name}\n", encoding="utf-8")


# ----- across vendors and back ------------------------------------------------------------------


async def test_a_conversation_with_tools_goes_across_three_vendors_and_back(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    files(tmp_path, "a.py", "b.py", "c.py", "d.py")
    server = await start(server_factory, strict, THREE)
    session, result = await new_session(server, tmp_path)
    model = option(result["configOptions"], "model")
    assert model is not None and model["currentValue"] == "openai:model-a"
    strict.queue(*tool_turn("a.py"))
    stop, _ = await prompt(server, session, text("Remember the word PELICAN, then read a.py."))
    assert stop == "end_turn"
    for value, path in (("anthropic:claude-b", "b.py"), ("ollama:model-c", "c.py")):
        answer = await choose(server, session, "model", value)
        chosen = option(answer["result"]["configOptions"], "model")
        assert chosen is not None and chosen["currentValue"] == value
        strict.queue(*tool_turn(path))
        stop, seen = await prompt(server, session, text(f"Now read {path}."))
        assert (stop, message_text(seen)) == ("end_turn", f"Read {path}.")
    await choose(server, session, "model", "openai:model-a")
    strict.queue(*tool_turn("d.py"))
    stop, _ = await prompt(server, session, text("Now read d.py."))
    assert stop == "end_turn"
    assert strict.invalid == []
    assert [r.path for r in strict.chat_requests] == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages",
        "/api/chat",
        "/api/chat",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert "PELICAN" in str(strict.chat_requests[-1].json)


async def test_thinking_on_claude_then_another_claude_then_openai(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    files(tmp_path, "a.py", "b.py", "c.py")
    models = ("anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-1", "openai:gpt-5-mini")
    server = await start(server_factory, strict, models)
    session, _ = await new_session(server, tmp_path)
    answer = await choose(server, session, "thought_level", "low")
    level = option(answer["result"]["configOptions"], "thought_level")
    assert level is not None and level["currentValue"] == "low"
    strict.queue(*tool_turn("a.py", thought="SECRET-REASONING about a."))
    assert (await prompt(server, session, text("Read a.py.")))[0] == "end_turn"
    first = strict.chat_requests[0].json
    assert first["thinking"]["type"] == "enabled"
    resent = strict.chat_requests[1].json["messages"][1]["content"]
    assert resent[0]["type"] == "thinking"  # its own signature goes back to the same model
    await choose(server, session, "model", "anthropic:claude-opus-4-1")
    strict.queue(*tool_turn("b.py", thought="More thoughts."))
    assert (await prompt(server, session, text("Read b.py.")))[0] == "end_turn"
    answer = await choose(server, session, "model", "openai:gpt-5-mini")
    level = option(answer["result"]["configOptions"], "thought_level")
    assert level is not None and level["currentValue"] == "low"  # gpt-5 has it too
    strict.queue(*tool_turn("c.py"))
    assert (await prompt(server, session, text("Read c.py.")))[0] == "end_turn"
    assert strict.invalid == []
    last = strict.chat_requests[-1].json
    assert last["reasoning_effort"] == "low"
    assert "SECRET-REASONING" not in str(last)  # foreign reasoning dropped, not made text


# ----- the options on the wire --------------------------------------------------------------


async def test_unknown_values_are_named_and_set_model_is_an_alias(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    server = await start(server_factory, strict, THREE)
    session, _ = await new_session(server, tmp_path)
    answer = await choose(server, session, "model", "openai")
    assert answer["error"]["code"] == -32602 and "'openai'" in answer["error"]["message"]
    answer = await choose(server, session, "colour", "blue")
    assert answer["error"]["code"] == -32602 and "'colour'" in answer["error"]["message"]
    req = await server.call(
        "session/set_model", {"sessionId": session, "modelId": "ollama:model-c"}
    )
    answer, before = await server.response(req)
    assert answer["result"] == {}
    [update] = [u for u in updates_of(before) if u["sessionUpdate"] == "config_option_update"]
    model = option(update["configOptions"], "model")
    assert model is not None and model["currentValue"] == "ollama:model-c"
    assert [o["id"] for o in update["configOptions"]] == ["mode", "model"]


async def test_load_restores_the_model_and_the_thought_level(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    models = ("openai:gpt-4.1-mini", "openai:o3", "anthropic:claude-b")
    server = await start(server_factory, strict, models)
    session, _ = await new_session(server, tmp_path)
    await choose(server, session, "model", "openai:o3")
    await choose(server, session, "thought_level", "high")
    strict.queue({"text": "Noted."})
    assert (await prompt(server, session, text("hello")))[0] == "end_turn"
    await server.stop()
    again = await start(server_factory, strict, models)
    params = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    answer = await again.request("session/load", params)
    options = answer["result"]["configOptions"]
    model, level = option(options, "model"), option(options, "thought_level")
    assert model is not None and model["currentValue"] == "openai:o3"
    assert level is not None and level["currentValue"] == "high"
    strict.queue({"text": "Still here."})
    assert (await prompt(again, session, text("and now?")))[0] == "end_turn"
    assert strict.chat_requests[-1].json["model"] == "o3"
    assert strict.chat_requests[-1].json["reasoning_effort"] == "high"


async def test_a_switch_to_a_smaller_window_fits_the_first_request(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[[models]]\nprovider = "ollama"\nid = "small"\nwindow = 2048\n', encoding="utf-8"
    )
    server = await start(server_factory, strict, ("openai:big",), ACP_SERVER_CONFIG=str(config))
    session, _ = await new_session(server, tmp_path)
    for n in range(6):
        strict.queue({"text": "ok " * 300})
        await prompt(server, session, text(f"question {n}: " + "words " * 300))
    await choose(server, session, "model", "ollama:small")
    strict.set(window=2048)
    strict.queue({"text": "fits"})
    stop, _ = await prompt(server, session, text("and now?"))
    assert stop == "end_turn" and strict.overflows == []


# ----- images -----------------------------------------------------------------------------------


async def test_an_image_reaches_a_model_that_reads_images_and_a_note_reaches_one_that_cannot(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[[models]]\nprovider = "openai"\nid = "sees"\nimages = true\n\n'
        '[[models]]\nprovider = "openai"\nid = "blind"\nimages = false\n',
        encoding="utf-8",
    )
    server = await start(server_factory, mock_llm, (), ACP_SERVER_CONFIG=str(config))
    session, _ = await new_session(server, tmp_path)
    image = {"type": "image", "mimeType": "image/png", "data": PIXEL}
    mock_llm.queue({"text": "A dot."})
    assert (await prompt(server, session, text("What is this?"), image))[0] == "end_turn"
    sent = mock_llm.chat_requests[-1].json["messages"][-1]["content"]
    assert any(part.get("type") == "image_url" for part in sent)
    await choose(server, session, "model", "openai:blind")
    mock_llm.queue({"text": "I cannot see it."})
    assert (await prompt(server, session, text("And this?"), image))[0] == "end_turn"
    request = str(mock_llm.chat_requests[-1].json)
    assert "image_url" not in request and "cannot see images" in request


async def test_a_server_that_refuses_images_gets_the_round_again_with_notes(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    server = await start(server_factory, mock_llm, ("openai:unknown-eyes",))
    session, _ = await new_session(server, tmp_path)
    refusal = "Invalid content type. image_url is only supported by certain models."
    mock_llm.queue({"fault": "status", "status": 400, "message": refusal}, {"text": "Noted."})
    image = {"type": "image", "mimeType": "image/png", "data": PIXEL}
    stop, seen = await prompt(server, session, text("Look."), image)
    assert stop == "end_turn" and "Noted." in message_text(seen)
    assert "image_url" in str(mock_llm.chat_requests[0].json)
    assert "image_url" not in str(mock_llm.chat_requests[1].json)
