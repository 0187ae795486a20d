"""The configuration file's `compaction_model`, through the real `acp-server` over real pipes.

Two mock LLM servers: the session's model on one, the compaction model (a provider of the
configuration file) on the other. Summaries go to the compaction model; the turns stay on the
session's model. A compaction model that cannot be used (its key is missing) leaves the
summaries to the session's model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.context_session import start_reader, summary_requests, write_files
from tests.support.mock_llm import MockLLM, Response, running_mock_llm
from tests.support.mock_llm.responders import file_reader
from tests.support.mock_llm.view import is_summary

Start = Callable[..., Any]
SUMMARY = "The user asked to read files one by one; each begins with a unique word."


@pytest.fixture
async def cheap() -> AsyncIterator[MockLLM]:
    async with running_mock_llm() as server:
        server.responder = lambda body: {"text": SUMMARY}
        yield server


def summaries(answer: str) -> Callable[[dict[str, Any]], Response]:
    """`file_reader`, but a summary request (no tools) is answered with `answer`."""
    reader = file_reader()

    def respond(body: dict[str, Any]) -> Response:
        return {"text": answer} if is_summary(body) else reader(body)

    return respond


async def read_until_compacted(
    server_factory: Start, mock: MockLLM, cheap: MockLLM, cwd: Path, config: str
) -> None:
    """A session with a 4K window on `mock` that reads files until a summary was asked for
    (of either server)."""
    mock.window = mock.report_window = 4096
    mock.responder = summaries("A summary by the session's own model.")
    path = cwd / "config.toml"
    path.write_text(config, encoding="utf-8")
    names = write_files(cwd, 4, 2000)
    reader = await start_reader(
        server_factory, mock, cwd, "--config", str(path), env={"ACP_SERVER_DISCOVER": "0"}
    )
    await reader.read_until(names, lambda: bool(summary_requests(mock) or summary_requests(cheap)))


async def test_summaries_go_to_the_compaction_model(
    server_factory: Start, mock_llm: MockLLM, cheap: MockLLM, tmp_path: Path
) -> None:
    config = (
        'compaction_model = "cheap:summarizer"\n'
        f'[providers.cheap]\ndialect = "openai"\nbase_url = "{cheap.url}/v1"\n'
    )
    await read_until_compacted(server_factory, mock_llm, cheap, tmp_path, config)
    asked = summary_requests(cheap)
    assert asked and all(r.json["model"] == "summarizer" for r in asked)
    assert summary_requests(mock_llm) == []  # the session's model only answered the turns
    assert not any(is_summary(r.json) for r in mock_llm.chat_requests)


async def test_a_compaction_model_that_cannot_be_used_leaves_summaries_to_the_session_model(
    server_factory: Start, mock_llm: MockLLM, cheap: MockLLM, tmp_path: Path
) -> None:
    config = (
        'compaction_model = "cheap:summarizer"\n'
        f'[providers.cheap]\ndialect = "openai"\nbase_url = "{cheap.url}/v1"\n'
        'api_key_env = "CHEAP_KEY_NOT_SET"\n'
    )
    await read_until_compacted(server_factory, mock_llm, cheap, tmp_path, config)
    assert cheap.chat_requests == []
    assert summary_requests(mock_llm)
