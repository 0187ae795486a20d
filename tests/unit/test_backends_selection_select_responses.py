"""Which models get the OpenAI Responses API: named (`openai-responses:MODEL`, a provider of
that dialect in the configuration file), or chosen for an OpenAI reasoning model on OpenAI's
own API; every other `openai` model keeps chat completions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.providers import builtin_providers
from acp_server.backends.responses.backend import ResponsesBackend
from acp_server.backends.selection import select
from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.config.file import load_config
from acp_server.messages import ModelRequest, StreamError, text_message

KEY = {"OPENAI_API_KEY": "sk-test-000001"}


@pytest.mark.parametrize(
    ("text", "env", "kind"),
    [
        ("openai-responses:gpt-4.1", KEY, ResponsesBackend),
        ("openai:gpt-5", KEY, ResponsesBackend),
        ("openai:o3", KEY, ResponsesBackend),
        ("openai:gpt-4.1", KEY, OpenAIBackend),
        ("openai:gpt-5", {**KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, OpenAIBackend),
        ("openai-responses:gpt-5", {**KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
         ResponsesBackend),
    ],
)  # fmt: skip
def test_the_dialect_each_model_gets(text: str, env: dict[str, str], kind: type) -> None:
    backend = select.choose(text, env)
    assert isinstance(backend, kind)


def test_the_responses_backend_is_addressed_like_the_chat_one() -> None:
    backend = select.choose("openai:gpt-5", KEY)
    assert isinstance(backend, ResponsesBackend)
    assert backend.base_url == "https://api.openai.com/v1"
    assert backend.api_key_env == "OPENAI_API_KEY" and backend.reasoning
    assert backend.label == "openai-responses:gpt-5"
    assert builtin_providers({})["openai-responses"].base_url == "https://api.openai.com/v1"


def test_a_configured_window_reaches_it() -> None:
    provider = builtin_providers(KEY)["openai"]
    backend = select.from_provider(provider, "gpt-5", KEY, window=400_000)
    assert isinstance(backend, ResponsesBackend)
    assert backend._window == 400_000


async def test_without_the_key_it_says_which_variable_to_set() -> None:
    backend = select.choose("openai-responses:gpt-5", {})
    assert isinstance(backend, UnconfiguredBackend)
    events = [e async for e in backend.stream(ModelRequest((text_message("user", "hi"),)))]
    (error,) = [e for e in events if isinstance(e, StreamError)]
    assert "OpenAI's API" in error.message and "OPENAI_API_KEY" in error.message


def test_a_provider_of_the_file_can_speak_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    text = """\
        [providers.azure]
        dialect = "openai-responses"
        base_url = "https://team.openai.azure.example/openai/v1"
        api_key_env = "AZURE_OPENAI_API_KEY"
        """
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    config = load_config(path, {})
    (azure,) = [p for p in config.providers if p.name == "azure"]
    env = {"AZURE_OPENAI_API_KEY": "k"}
    assert isinstance(select.from_provider(azure, "gpt-5-mini", env), ResponsesBackend)


def test_the_model_string_names_the_dialect() -> None:
    assert select.ModelSpec.parse("openai-responses:gpt-5") == select.ModelSpec(
        "openai-responses", "gpt-5"
    )
    with pytest.raises(select.ModelSpecError, match="openai-responses"):
        select.ModelSpec.parse("responses:gpt-5")
