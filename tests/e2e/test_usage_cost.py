"""The cost in `usage_update`, through the real `acp-server` over real pipes.

A model with a `price` in the configuration file makes every `usage_update` carry the session's
cumulative cost (computed from the prompt and completion tokens the server reported); the cost
keeps adding up across a model switch; a session on a model without a price shows none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_backends_e2e import Start, endpoint_env
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
