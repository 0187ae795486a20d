"""`initialize` decides on authentication from the model configuration; a configuration that
cannot even be read is not a reason to fail the handshake (session/new reports it). `authenticate`
says precisely what still stands between the user and a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.errors import AuthRequired
from acp_server.models.source import ModelSource
from acp_server.protocol.handlers import AcpAgent


async def test_initialize_answers_when_the_models_cannot_be_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def unreadable() -> ModelSource | None:
        raise PermissionError("config.toml: permission denied")

    agent = AcpAgent(lambda: UnconfiguredBackend("none"), models=unreadable)
    result = await agent.initialize({"protocolVersion": 1})
    assert [m["id"] for m in result["authMethods"]] == ["setup"]
    assert "cannot tell whether the default model needs a key" in caplog.text
    with pytest.raises(PermissionError):  # tried again, and reported, at the first session
        agent.model_source()


def agent_for(tmp_path: Path, *values: str, config: str = "") -> AcpAgent:
    path = tmp_path / "config.toml"
    if config:
        path.write_text(config, encoding="utf-8")
    env = {"ACP_SERVER_DISCOVER": "0"}
    return AcpAgent(
        lambda: UnconfiguredBackend("none"), models=lambda: ModelSource(values, env, path)
    )


async def test_authenticate_names_a_model_file_that_is_not_there(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, f"local:{tmp_path / 'gone.gguf'}")
    await agent.initialize({"protocolVersion": 1})
    with pytest.raises(AuthRequired, match=r"gone\.gguf does not exist.*acp-server setup"):
        await agent.authenticate({"methodId": "setup"})


async def test_authenticate_says_the_file_is_broken(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, config='default_model = "nowhere:x"\n')
    await agent.initialize({"protocolVersion": 1})
    with pytest.raises(AuthRequired, match="nowhere"):
        await agent.authenticate({"methodId": "setup"})


async def test_authenticate_succeeds_for_a_model_that_needs_nothing(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, "ollama:qwen3:8b")
    await agent.initialize({"protocolVersion": 1})
    assert await agent.authenticate({"methodId": "setup"}) == {}
    # An id of a client's own configuration, while no key is missing, is checked the same way.
    assert await agent.authenticate({"methodId": "env"}) == {}
