"""Backends built from a configured provider: dialect, base URL, extra headers, and a key read
from the variable the provider names at each request; the key variables known to redaction."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from acp_server import redaction
from acp_server.backends.anthropic.backend import AnthropicBackend
from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.selection import select
from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.config.file import Provider, builtin_providers, load_config
from acp_server.messages import Event, ModelRequest, StreamError, TextDelta, text_message
from tests.support.mock_llm import MockLLM

ASK = ModelRequest((text_message("user", "hi"),))


async def collect(backend: object) -> list[Event]:
    assert isinstance(backend, OpenAIBackend | AnthropicBackend | OllamaBackend)
    try:
        return [event async for event in backend.stream(ASK)]
    finally:
        await backend.aclose()


def reply_text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_a_gateway_provider_gets_its_headers_and_the_key_of_the_moment(
    mock_llm: MockLLM,
) -> None:
    gateway = Provider(
        "openai", "openai", mock_llm.url + "/v1", "GATEWAY_KEY", (("X-Team", "tools"),)
    )
    env = {"GATEWAY_KEY": "sk-gateway-first-0001"}
    backend = select.from_provider(gateway, "gpt-x", env)
    assert isinstance(backend, OpenAIBackend)
    mock_llm.queue({"text": "one"}, {"text": "two"})
    events = [e async for e in backend.stream(ASK)]
    env["GATEWAY_KEY"] = "sk-gateway-second-0002"  # read at each request, never kept
    events += [e async for e in backend.stream(ASK)]
    await backend.aclose()
    assert reply_text(events) == "onetwo"
    first, second = mock_llm.chat_requests
    assert first.headers["authorization"] == "Bearer sk-gateway-first-0001"
    assert second.headers["authorization"] == "Bearer sk-gateway-second-0002"
    assert first.headers["x-team"] == "tools" and first.json["model"] == "gpt-x"
    assert "sk-gateway" not in repr(backend._key)


async def test_an_anthropic_provider_sends_the_key_as_x_api_key(mock_llm: MockLLM) -> None:
    provider = Provider("work", "anthropic", mock_llm.url, "WORK_ANTHROPIC_KEY")
    env = {"WORK_ANTHROPIC_KEY": "sk-ant-work-0001"}
    backend = select.from_provider(
        provider, "claude-sonnet-4-5", env, window=150_000, adaptive_thinking=True
    )
    assert isinstance(backend, AnthropicBackend) and backend.adaptive_thinking
    assert await backend.context_window() == 150_000
    mock_llm.queue({"text": "hello"})
    assert reply_text(await collect(backend)) == "hello"
    assert mock_llm.chat_requests[0].headers["x-api-key"] == "sk-ant-work-0001"


async def test_an_ollama_provider_sends_the_configured_window_as_num_ctx(
    mock_llm: MockLLM,
) -> None:
    provider = Provider("box", "ollama", mock_llm.url, None, (("X-Proxy", "p1"),))
    backend = select.from_provider(provider, "qwen3:8b", {}, window=16_384, images=False)
    assert isinstance(backend, OllamaBackend) and backend.images is False
    mock_llm.queue({"text": "ok"})
    assert reply_text(await collect(backend)) == "ok"
    chat = mock_llm.chat_requests[0]
    assert chat.json["options"]["num_ctx"] == 16_384
    assert chat.headers["x-proxy"] == "p1" and "authorization" not in chat.headers


async def test_a_file_provider_without_its_key_fails_at_once_naming_variable_and_section() -> None:
    provider = Provider("openrouter", "openai", "https://openrouter.example/v1", "OR_KEY")
    backend = select.from_provider(provider, "some/model", {})
    assert isinstance(backend, UnconfiguredBackend)  # no request is made at all
    events = [e async for e in backend.stream(ASK)]
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert "OR_KEY" in events[0].message and "[providers.openrouter]" in events[0].message


def test_a_built_in_provider_pointed_elsewhere_needs_no_key() -> None:
    local = Provider("openai", "openai", "http://127.0.0.1:8000/v1", "OPENAI_API_KEY")
    assert isinstance(select.from_provider(local, "m", {}), OpenAIBackend)
    hosted = builtin_providers({})["anthropic"]
    assert isinstance(select.from_provider(hosted, "c", {}), UnconfiguredBackend)


def test_the_environment_only_path_is_the_built_in_provider() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-env-000001"}
    backend = select.choose("openai:m", env)
    assert isinstance(backend, OpenAIBackend)
    assert backend.base_url == "http://127.0.0.1:9/v1" and backend.api_key_env == "OPENAI_API_KEY"
    assert backend._request_headers() == {"Authorization": "Bearer sk-env-000001"}


def test_every_configured_key_variable_and_secret_header_is_known_to_redaction(
    tmp_path: Path,
) -> None:
    variable = f"TEAM_KEY_{uuid.uuid4().hex[:8].upper()}"
    header_secret = "portkey-" + uuid.uuid4().hex
    path = tmp_path / "config.toml"
    text = f"""\
        [providers.team]
        dialect = "openai"
        base_url = "https://llm.team.example/v1"
        api_key_env = "{variable}"
        headers = {{ "X-Portkey-Api-Key" = "{header_secret}", "X-Team" = "tools" }}
        """
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    load_config(path, {})
    env = {variable: "sk-team-secret-0001", "HOME": "/home/me"}
    assert variable in redaction.key_variables(env)
    assert redaction.command_environment(env) == {"HOME": "/home/me"}
    assert header_secret not in redaction.redact(f"the gateway echoed {header_secret}")
    assert redaction.redact("team tools") == "team tools"


def test_an_ollama_server_named_through_openai_gets_its_native_api_and_window() -> None:
    for base in ("http://127.0.0.1:11434/v1", "http://ollama:8000/v1"):
        backend = select.from_provider(Provider("box", "openai", base), "qwen3:8b", {}, window=9000)
        assert isinstance(backend, OllamaBackend), base
        assert backend.base_url == base.removesuffix("/v1") and backend.num_ctx == 9000
    other = select.from_provider(Provider("lm", "openai", "http://127.0.0.1:1234/v1"), "m", {})
    assert isinstance(other, OpenAIBackend)


async def test_an_ollama_provider_whose_url_ends_in_v1_posts_to_the_native_api(
    mock_llm: MockLLM,
) -> None:
    backend = select.from_provider(Provider("o", "ollama", mock_llm.url + "/v1/"), "qwen3:8b", {})
    assert isinstance(backend, OllamaBackend)
    events = await collect(backend)
    assert not any(isinstance(e, StreamError) for e in events), events
    assert [r.path for r in mock_llm.chat_requests] == ["/api/chat"]


async def test_the_embedded_model_takes_the_configured_window() -> None:
    provider = builtin_providers({})["local"]
    backend = select.from_provider(provider, "smollm2", {}, window=4096)
    if isinstance(backend, UnconfiguredBackend):
        pytest.skip("the `local` extra is not installed")
    assert await backend.context_window() == 4096
    env = {"ACP_SERVER_LOCAL_CONTEXT": "2048"}  # the variable says otherwise: it wins
    assert (
        await select.from_provider(provider, "smollm2", env, window=4096).context_window() == 2048
    )
