"""The model catalogue: what is known of hosted models without asking their servers, and the
OpenAI backend's use of it (window order, the reply cap's parameter)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

import httpx
import pytest

from acp_server.backends import catalog, window_origin
from acp_server.backends.anthropic.backend import AnthropicBackend
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.responses.backend import ResponsesBackend
from acp_server.messages import ModelRequest, text_message

BASE = "http://llm.test/v1"
SUMMARY = ModelRequest(messages=(text_message("user", "sum up"),), max_tokens=900)
# What api.openai.com's /v1/models lists: ids, no windows.
OPENAI_MODELS = {"object": "list", "data": [{"id": "gpt-4.1", "object": "model"}]}
DONE = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'


@pytest.mark.parametrize(
    ("model", "window", "output"),
    [
        ("gpt-4.1", 1_047_576, 32_768),
        ("gpt-4o", 128_000, 16_384),
        ("o3", 200_000, 100_000),
        ("claude-sonnet-4-5", 200_000, 64_000),
        ("gemini-2.5-pro", 1_048_576, 65_536),
        ("deepseek-chat", 131_072, 8_192),
    ],
)
def test_the_major_families_are_known(model: str, window: int, output: int) -> None:
    facts = catalog.lookup(model)
    assert facts is not None
    assert (facts.window, facts.output) == (window, output)
    assert facts.source.startswith("the model catalogue (LiteLLM ")


def test_a_gateway_prefix_a_date_and_case_are_looked_through() -> None:
    for name in ("openai/gpt-4.1", "GPT-4.1", "gpt-4.1-2099-01-01", "models/gemini-2.5-pro"):
        assert catalog.lookup(name) is not None, name
    assert catalog.lookup("my-own-finetune") is None


def test_abilities_and_parameters() -> None:
    o3, gpt41, mini = (catalog.lookup(m) for m in ("o3", "gpt-4.1", "o3-mini"))
    assert o3 is not None and gpt41 is not None and mini is not None
    assert (o3.reasoning, o3.completion_tokens, o3.temperature) == (True, True, False)
    assert (gpt41.reasoning, gpt41.completion_tokens, gpt41.temperature) == (False, False, True)
    assert (gpt41.images, mini.images) == (True, False)


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("o4-mini", True),
        ("o9-preview", True),  # not in the table: OpenAI's naming says so
        ("gpt-5.9-unheard-of", True),
        ("gpt-5-chat-latest", False),  # ChatGPT's model: no reasoning parameters
        ("gpt-5.9-chat-latest", False),
        ("gpt-4.1", False),
        ("gpt-4o-mini", False),
        ("qwen3:8b", False),
        ("omni-model", False),
    ],
)
def test_which_models_are_openai_reasoning_models(model: str, reasoning: bool) -> None:
    assert catalog.openai_reasoning(model) is reasoning


def test_every_entry_is_well_formed() -> None:
    data = json.loads((resources.files("acp_server.backends") / catalog.DATA).read_text())
    assert data["source"]["license"] == "MIT" and data["source"]["version"]
    vendors = {entry["vendor"] for entry in data["models"].values()}
    assert {"openai", "anthropic", "google", "deepseek", "mistral", "qwen"} <= vendors
    for key, entry in data["models"].items():
        assert isinstance(entry["window"], int) and entry["window"] > 0, key


# ----- the OpenAI backend's use of it -----------------------------------------------------------


class Server:
    """/models as api.openai.com answers it; chat completions recorded."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=OPENAI_MODELS)
        if request.method == "GET":
            return httpx.Response(404, json={"error": {"message": "not found"}})
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, text=DONE + "data: [DONE]\n\n")


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., tuple[OpenAIBackend, Server]]]:
    made: list[OpenAIBackend] = []

    def build(model: str, **kw: Any) -> tuple[OpenAIBackend, Server]:
        server = Server()
        made.append(OpenAIBackend(BASE, model, transport=httpx.MockTransport(server), **kw))
        return made[-1], server

    yield build
    for backend in made:
        await backend.aclose()


async def test_a_server_that_tells_no_window_gets_the_catalogues(make: Any) -> None:
    backend, _ = make("gpt-4.1")
    assert await backend.context_window() == 1_047_576
    assert window_origin(backend).startswith("the model catalogue (LiteLLM ")


async def test_a_configured_window_wins_over_the_catalogue(make: Any) -> None:
    backend, _ = make("gpt-4.1", window=200_000)
    assert await backend.context_window() == 200_000
    assert window_origin(backend) == "the configuration file"


async def test_an_unknown_model_on_a_silent_server_has_no_window(make: Any) -> None:
    backend, _ = make("my-own-finetune")
    assert await backend.context_window() is None
    assert window_origin(backend) == ""


async def test_a_reasoning_model_gets_max_completion_tokens_and_no_temperature(make: Any) -> None:
    backend, server = make("o3")
    async for _ in backend.stream(SUMMARY):
        pass
    (body,) = server.bodies
    assert body["max_completion_tokens"] == 900
    assert "max_tokens" not in body and "temperature" not in body


async def test_other_models_keep_max_tokens(make: Any) -> None:
    backend, server = make("gpt-4.1")
    async for _ in backend.stream(SUMMARY):
        pass
    assert server.bodies[0]["max_tokens"] == 900
    assert "max_completion_tokens" not in server.bodies[0]


def test_claudes_reply_cap_is_its_output_limit() -> None:
    assert AnthropicBackend("https://api.test", "claude-sonnet-4-5").max_tokens == 64_000
    assert AnthropicBackend("https://api.test", "gateway-model").max_tokens == 8192
    assert (
        AnthropicBackend("https://api.test", "claude-sonnet-4-5", max_tokens=500).max_tokens == 500
    )


def test_on_a_local_server_only_models_nobody_runs_themselves_are_looked_up() -> None:
    local, hosted = "http://127.0.0.1:1234/v1", "https://api.deepseek.com/v1"
    assert catalog.lookup_at("deepseek-chat", hosted) is not None
    assert catalog.lookup_at("deepseek-chat", local) is None  # its server gives its window
    assert catalog.lookup_at("gemma-3-27b-it", "http://192.168.1.20:8080/v1") is None
    for model in ("gpt-4.1", "claude-sonnet-4-5", "gemini-2.5-pro"):  # a local proxy
        assert catalog.lookup_at(model, local) is not None, model


async def test_a_local_server_that_tells_no_window_is_not_given_a_vendors() -> None:
    backend = OpenAIBackend("http://127.0.0.1:9/v1", "deepseek-chat")
    assert backend.facts is None
    await backend.aclose()


async def test_the_responses_api_gets_the_catalogues_window_too() -> None:
    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"object": "list", "data": [{"id": "o3"}]})

    backend = ResponsesBackend(
        "https://api.openai.com/v1", "o3", transport=httpx.MockTransport(server)
    )
    try:
        assert await backend.context_window() == 200_000
        assert window_origin(backend).startswith("the model catalogue (LiteLLM ")
    finally:
        await backend.aclose()
    configured = ResponsesBackend("https://api.openai.com/v1", "o3", context_window=50_000)
    assert await configured.context_window() == 50_000
    assert window_origin(configured) == "the configuration file"
