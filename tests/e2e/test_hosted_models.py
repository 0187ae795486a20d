"""Real models' windows and parameters, through the real `acp-server`, against strict mocks.

The mock plays api.openai.com as strictly as it is: `/v1/models` lists ids without windows,
the reasoning models refuse `max_tokens` and a temperature with OpenAI's own 400 bodies, and
every history is checked as the real API checks it. A 30-turn tool-using session on each model
completes with no request refused, summaries (`/compact`) that succeed, and every
`usage_update.size` equal to the model's real window — from the model catalogue, or from the
configuration file, which wins for every dialect.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.context_session import ReaderSession, compactions, write_files
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.responders import file_reader
from tests.support.mock_llm.view import is_summary

Start = Callable[..., Any]
GPT_41_WINDOW = 1_047_576  # OpenAI's documented window of gpt-4.1
O3_WINDOW = 200_000


async def session_on(
    server_factory: Start, mock: MockLLM, cwd: Path, model: str, *args: str, **env: str
) -> ReaderSession:
    """A session of `--model MODEL` with the mock as the OpenAI (and Ollama) endpoint."""
    mock.responder = file_reader()
    environment = {
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock-key-123456",
        "OLLAMA_HOST": mock.url,
        "ANTHROPIC_BASE_URL": mock.url,
        "ANTHROPIC_API_KEY": "sk-ant-mock-123456",
        "ACP_SERVER_RETRY_ATTEMPTS": "2",
        "ACP_SERVER_RETRY_BASE_DELAY": "0.01",
        "ACP_SERVER_DISCOVER": "0",
        **env,
    }
    server = await server_factory("--model", model, *args, env=environment)
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return ReaderSession(server, answer["result"]["sessionId"], mock)


def sizes(reader: ReaderSession) -> set[int]:
    """Every `usage_update.size` the session showed."""
    return {u["size"] for t in reader.turns for u in t.seen if u["sessionUpdate"] == "usage_update"}


async def thirty_turns(reader: ReaderSession, names: list[str]) -> None:
    """30 tool-using turns, with a `/compact` every tenth: each answered from its file, and
    each compaction a summary."""
    for n in range(30):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"The file begins with word{n % len(names)}." in turn.text, (n, turn.text)
        if n % 10 == 9:
            compacted = await reader.prompt("/compact")
            (final,) = compactions(compacted.seen)
            assert final["status"] == "completed", final
            assert "summarized" in str(final), final


@pytest.mark.parametrize(("model", "window"), [("gpt-4.1", GPT_41_WINDOW), ("o3", O3_WINDOW)])
async def test_thirty_turns_on_strict_openai_with_the_models_real_window(
    server_factory: Start, tmp_path: Path, model: str, window: int
) -> None:
    async with MockLLM(strict_dialect=True) as mock:
        mock.set(models=[model, "gpt-4o-mini", "text-embedding-3-small"])  # no windows
        names = write_files(tmp_path, 5, 4000)
        reader = await session_on(server_factory, mock, tmp_path, f"openai:{model}")
        await thirty_turns(reader, names)
        assert mock.invalid == []  # no request refused
        assert sizes(reader) == {window}
        bodies = [r.json for r in mock.chat_requests]
        summaries = [b for b in bodies if is_summary(b)]
        assert len(summaries) >= 3
        limit = "max_completion_tokens" if model == "o3" else "max_tokens"
        assert all(limit in b for b in summaries)
        assert not any("temperature" in b for b in bodies)


@pytest.mark.parametrize("dialect", ["openai", "ollama", "anthropic"])
async def test_a_configured_window_wins_for_every_dialect(
    server_factory: Start, tmp_path: Path, dialect: str
) -> None:
    model = {"openai": "gpt-4.1", "ollama": "qwen3:8b", "anthropic": "claude-sonnet-4-5"}[dialect]
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[models]]\nprovider = "{dialect}"\nid = "{model}"\nwindow = 60000\n', encoding="utf-8"
    )
    async with MockLLM(strict_dialect=True) as mock:
        mock.set(model=model, context_length=131_072)  # the server says more: the file wins
        reader = await session_on(
            server_factory, mock, tmp_path, f"{dialect}:{model}", "--config", str(config)
        )
        for _ in range(3):
            turn = await reader.prompt("Hello, how are you?")
            assert turn.stop == "end_turn", turn.text
        assert mock.invalid == []
        assert sizes(reader) == {60_000}


async def test_thirty_turns_on_ollama_whose_prompt_counts_are_net_of_its_cache(
    server_factory: Start, tmp_path: Path
) -> None:
    """Older Ollama counts only the prompt tokens its cache did not hold: a count far below
    what was sent is no cut, and the window stays the one the agent sends as num_ctx."""
    async with MockLLM(strict_dialect=True, cache_net=True) as mock:
        mock.set(model="qwen3:8b", context_length=40_960, num_ctx=None)  # no Modelfile num_ctx
        names = write_files(tmp_path, 5, 4000)
        reader = await session_on(server_factory, mock, tmp_path, "ollama:qwen3:8b")
        await thirty_turns(reader, names)
        assert mock.invalid == []
        assert sizes(reader) == {32_768}  # the num_ctx sent (the trained length is larger)
        chats = [r.json for r in mock.chat_requests]
        assert {b["options"]["num_ctx"] for b in chats} == {32_768}
        assert not any("dropped the start" in t.text for t in reader.turns)


async def test_a_spent_quota_is_shown_at_once_never_retried(
    server_factory: Start, tmp_path: Path
) -> None:
    quota = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    async with MockLLM(strict_dialect=True) as mock:
        mock.queue({"fault": "status", "status": 429, "retry_after": 1, "body": quota})
        reader = await session_on(
            server_factory, mock, tmp_path, "openai:gpt-4.1", ACP_SERVER_RETRY_ATTEMPTS="4"
        )
        turn = await reader.prompt("Hello")
        assert len(mock.chat_requests) == 1  # asked once, not four times over a minute
        assert "You exceeded your current quota" in turn.text, turn.text
        assert "retrying would not help" in turn.text
        assert "retrying in" not in turn.text
        limited = {"fault": "status", "status": 429, "retry_after": 0, "message": "Slow down"}
        mock.queue(limited, {"text": "Fine."})
        turn = await reader.prompt("Hello again")  # a rate limit still waits and retries
        assert "Fine." in turn.text and len(mock.chat_requests) == 3
