"""The cost in `usage_update`, through the real `acp-server` over real pipes.

A model with a `price` in the configuration file makes every `usage_update` carry the session's
cumulative cost (computed from the prompt and completion tokens the server reported); the cost
keeps adding up across a model switch; a session on a model without a price shows none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_backends_e2e import Agent, Start, endpoint_env, open_agent
from tests.e2e.test_model_switching import choose, new_session, prompt, text
from tests.support.mock_llm import MockLLM
from tests.support.raw import RawServer

CONFIG = """
[[models]]
provider = "openai"
id = "model-a"
price = { input = 2, output = 8 }

[[models]]
provider = "openai"
id = "model-b"
price = { input = 1, output = 4 }

[[models]]
provider = "openai"
id = "model-free"
"""


async def start(server_factory: Start, mock: MockLLM, tmp_path: Path, model: str) -> RawServer:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG, encoding="utf-8")
    env = endpoint_env("openai", mock, ACP_SERVER_DISCOVER="0")
    server: RawServer = await server_factory("--config", str(path), "--model", model, env=env)
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return server


def usages(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in seen if u["sessionUpdate"] == "usage_update"]


async def test_the_cost_adds_up_for_the_session_across_a_model_switch(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    server = await start(server_factory, mock_llm, tmp_path, "openai:model-a")
    session, _ = await new_session(server, tmp_path)
    mock_llm.queue({"text": "One.", "usage": {"prompt_tokens": 4000, "completion_tokens": 100}})
    _, seen = await prompt(server, session, text("first"))
    (usage,) = usages(seen)
    # 4,000 in at $2 and 100 out at $8 per million tokens.
    assert usage["cost"] == {"amount": pytest.approx(0.0088), "currency": "USD"}

    await choose(server, session, "model", "openai:model-b")
    mock_llm.queue({"text": "Two.", "usage": {"prompt_tokens": 5000, "completion_tokens": 200}})
    _, seen = await prompt(server, session, text("second"))
    (usage,) = usages(seen)
    # The session's total: the first round at model-a's price, the second at model-b's.
    assert usage["cost"]["amount"] == pytest.approx(0.0088 + 0.005 + 0.0008)


async def test_a_model_without_a_price_shows_no_cost(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    server = await start(server_factory, mock_llm, tmp_path, "openai:model-free")
    session, _ = await new_session(server, tmp_path)
    mock_llm.queue({"text": "Free.", "usage": {"prompt_tokens": 4000, "completion_tokens": 100}})
    _, seen = await prompt(server, session, text("hello"))
    (usage,) = usages(seen)
    assert "cost" not in usage and usage["used"] == 4100


ROUNDS = (  # a tool round, then the answer: what each reported
    {"prompt_tokens": 4000, "completion_tokens": 60, "cached_tokens": 3000},
    {"prompt_tokens": 4200, "completion_tokens": 40, "cached_tokens": 3968},
)


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "openai-responses"])
async def test_the_prompt_result_carries_the_turns_usage(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    written = 200 if dialect == "anthropic" else 0  # Anthropic alone bills cache writes apart
    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    call = {"name": "read_file", "arguments": {"path": "a.txt"}}
    first = {**ROUNDS[0], "cache_creation_tokens": written}
    mock_llm.queue({"tool_calls": [call], "usage": first}, {"text": "Done.", "usage": ROUNDS[1]})
    result = await prompt_result(agent)
    assert result["stopReason"] == "end_turn"
    assert result["usage"] == {
        "inputTokens": 8200,
        "outputTokens": 100,
        "totalTokens": 8300,
        "thoughtTokens": 0,
        "cachedReadTokens": 6968,
        "cachedWriteTokens": written,
    }
    assert result["_meta"]["acpServer"]["sessionUsage"] == result["usage"]
    mock_llm.queue({"text": "Again.", "usage": {"prompt_tokens": 100, "completion_tokens": 1}})
    second = await prompt_result(agent)
    assert second["usage"]["inputTokens"] == 100  # the turn's own ...
    assert second["_meta"]["acpServer"]["sessionUsage"]["inputTokens"] == 8300  # ... the session's


async def prompt_result(agent: Agent) -> dict[str, Any]:
    params = {"sessionId": agent.session, "prompt": [{"type": "text", "text": "go"}]}
    answer, _ = await agent.server.response(await agent.server.call("session/prompt", params), 20)
    result: dict[str, Any] = answer["result"]
    return result


async def test_cached_tokens_are_priced_at_their_price(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[models]]\nprovider = "openai"\nid = "model-c"\n'
        "price = { input = 2, output = 8, cached_input = 0.5 }\n",
        encoding="utf-8",
    )
    env = endpoint_env("openai", mock_llm, ACP_SERVER_DISCOVER="0")
    server: RawServer = await server_factory(
        "--config", str(path), "--model", "openai:model-c", env=env
    )
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session, _ = await new_session(server, tmp_path)
    usage = {"prompt_tokens": 4000, "completion_tokens": 100, "cached_tokens": 3000}
    mock_llm.queue({"text": "One.", "usage": usage})
    _, seen = await prompt(server, session, text("first"))
    (update,) = usages(seen)
    # 1,000 fresh at $2, 3,000 from the cache at $0.50 and 100 out at $8 per million tokens.
    assert update["cost"] == {"amount": pytest.approx(0.0043), "currency": "USD"}
