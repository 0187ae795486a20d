"""Discovery: the models of local servers (Ollama, LM Studio, llama.cpp), with windows and
capabilities, within a short timeout, never raising; and the catalogue taking them in."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from acp_server import redaction
from acp_server.backends.providers import ModelConfig, Provider, builtin_providers
from acp_server.backends.selection.discover import Discovered, discover
from acp_server.config.file import Config
from acp_server.models.catalogue import build_catalogue
from tests.support.mock_llm import MockLLM, running_mock_llm

NOWHERE = "http://127.0.0.1:9/v1"  # port 9 (discard): nothing listens there


def ollama(url: str) -> Provider:
    return Provider("ollama", "ollama", url)


async def test_ollama_models_come_with_window_and_capabilities(mock_llm: MockLLM) -> None:
    mock_llm.set(
        models=["qwen3:8b", "gemma3:4b", "gpt-oss:20b", "llama3.2"],
        context_length=131_072,
        num_ctx=None,  # no Modelfile num_ctx
        capabilities={
            "qwen3:8b": ["completion", "tools", "thinking"],
            "gemma3:4b": ["completion", "vision"],
            "gpt-oss:20b": ["completion", "tools", "thinking"],
            "llama3.2": ["completion", "tools"],
        },
    )
    found = await discover([ollama(mock_llm.url)], local_openai=())
    by_id = {m.id: m for m in found.models}
    assert list(by_id) == ["qwen3:8b", "gemma3:4b", "gpt-oss:20b", "llama3.2"]
    qwen = by_id["qwen3:8b"]
    # The window the backend will use: the trained 128k capped at the num_ctx it sends.
    assert (qwen.provider, qwen.window, qwen.tools, qwen.images) == ("ollama", 32_768, True, False)
    assert qwen.reasoning == ("off", "on")
    assert by_id["gpt-oss:20b"].reasoning == ("low", "medium", "high")
    gemma = by_id["gemma3:4b"]
    assert (gemma.images, gemma.tools, gemma.reasoning) == (True, False, ())
    assert found.providers == ()  # the Ollama provider was given, not made up


async def test_a_modelfile_num_ctx_is_the_window(mock_llm: MockLLM) -> None:
    mock_llm.set(model="small", context_length=131_072, num_ctx=8192)
    [model] = (await discover([ollama(mock_llm.url)], local_openai=())).models
    assert model.window == 8192


async def test_lm_studio_and_llama_cpp_are_found_without_a_provider(mock_llm: MockLLM) -> None:
    mock_llm.set(
        models=["qwen3-8b", "text-embedding-nomic-embed"], context_length=65_536, n_ctx=None
    )  # LM Studio: no /props
    async with running_mock_llm() as llama:
        llama.set(model="model.gguf", n_ctx=16_384, n_ctx_train=131_072, vision=True)
        found = await discover(
            [],
            local_openai=(("lmstudio", mock_llm.url + "/v1"), ("llamacpp", llama.url + "/v1")),
        )
    assert found.models == (
        ModelConfig("lmstudio", "qwen3-8b", window=65_536),  # no embedding model
        ModelConfig("llamacpp", "model.gguf", window=16_384, images=True),
    )
    assert [(p.name, p.dialect, p.origin) for p in found.providers] == [
        ("lmstudio", "openai", "discovered"),
        ("llamacpp", "openai", "discovered"),
    ]


async def test_the_trained_length_is_the_window_when_nothing_else_tells(mock_llm: MockLLM) -> None:
    mock_llm.set(models=["a.gguf", "b.gguf"], n_ctx_train=40_960)  # no /props: two models
    found = await discover([], local_openai=(("llamacpp", mock_llm.url + "/v1"),))
    assert [m.window for m in found.models] == [40_960, 40_960]


async def test_a_provider_already_pointing_at_a_local_server_is_used_not_doubled(
    mock_llm: MockLLM,
) -> None:
    mine = Provider("openai", "openai", mock_llm.url + "/v1", "OPENAI_API_KEY")
    found = await discover([mine], local_openai=(("lmstudio", mock_llm.url + "/v1"),))
    assert [m.value for m in found.models] == ["openai:mock-model"]
    assert found.providers == ()


async def test_hosted_apis_are_never_asked() -> None:
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json={"data": [{"id": "gpt-x"}]})

    hosted = list(builtin_providers({}).values())[:2]  # OpenAI's and Anthropic's APIs
    transport = httpx.MockTransport(answer)
    found = await discover(hosted, local_openai=(), transport=transport)
    assert found == Discovered() and asked == []


async def test_a_silent_server_costs_only_the_timeout_and_the_others_still_count(
    mock_llm: MockLLM,
) -> None:
    mock_llm.set(model="quick")
    release = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await release.wait()  # reads the request, never answers

    silent = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        started = time.monotonic()
        found = await discover(
            [ollama(mock_llm.url), ollama(f"http://127.0.0.1:{port}")],
            local_openai=(("nothing", NOWHERE),),
            timeout=0.5,
        )
        assert time.monotonic() - started < 2.0
    finally:
        release.set()
        silent.close()
        for writer in held:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await silent.wait_closed()
    assert [m.value for m in found.models] == ["ollama:quick"]


@pytest.mark.parametrize(
    "body", [b"not json", b'{"models": "nope"}', b'{"data": [1, null, {"id": 3}]}', b"[]"]
)
async def test_garbage_answers_add_nothing_and_never_raise(body: bytes) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    local = [ollama("http://127.0.0.1:11434"), Provider("lm", "openai", "http://127.0.0.1:1/v1")]
    assert await discover(local, local_openai=(), transport=transport) == Discovered()


@pytest.fixture
async def ollama_server() -> AsyncIterator[MockLLM]:
    async with running_mock_llm() as server:
        server.set(models=["qwen3:8b"], capabilities=["completion", "tools", "vision"])
        yield server


async def test_the_catalogue_takes_in_what_was_found(ollama_server: MockLLM) -> None:
    providers = {**builtin_providers({}), "ollama": ollama(ollama_server.url)}
    catalogue = build_catalogue(["openai:gpt-4.1-mini"], Config(tuple(providers.values())))
    async with running_mock_llm() as lmstudio:
        lmstudio.set(model="qwen3-8b")
        found = await discover(
            catalogue.providers.values(), local_openai=(("lmstudio", lmstudio.url + "/v1"),)
        )
    grown = catalogue.with_discovered(found.models, found.providers)
    assert [e.value for e in grown.entries] == [
        "openai:gpt-4.1-mini",
        "ollama:qwen3:8b",
        "lmstudio:qwen3-8b",
    ]
    qwen = grown.find("ollama:qwen3:8b")
    assert qwen is not None and qwen.images is True and qwen.origin == "discovered"
    assert "lmstudio" in grown.providers and grown.default == "openai:gpt-4.1-mini"


async def test_a_listed_name_that_holds_a_key_is_left_out(mock_llm: MockLLM) -> None:
    secret = "sk-discovery-secret-0123456789"
    redaction.remember_secret(secret)
    mock_llm.set(models=["qwen3:8b", f"echo-{secret}"], context_length=8192)
    found = await discover([ollama(mock_llm.url)], local_openai=())
    assert [m.id for m in found.models] == ["qwen3:8b"]
    listed = await discover([Provider("lm", "openai", mock_llm.url + "/v1")], local_openai=())
    assert [m.id for m in listed.models] == ["qwen3:8b"]
