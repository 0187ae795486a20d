"""`initialize` decides on authentication from the model configuration; a configuration that
cannot even be read is not a reason to fail the handshake (session/new reports it)."""

from __future__ import annotations

import pytest

from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.models.source import ModelSource
from acp_server.protocol.handlers import AcpAgent


async def test_initialize_answers_when_the_models_cannot_be_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def unreadable() -> ModelSource | None:
        raise PermissionError("config.toml: permission denied")

    agent = AcpAgent(lambda: UnconfiguredBackend("none"), models=unreadable)
    result = await agent.initialize({"protocolVersion": 1})
    assert result["authMethods"] == []
    assert "cannot tell whether the default model needs a key" in caplog.text
    with pytest.raises(PermissionError):  # tried again, and reported, at the first session
        agent.model_source()
