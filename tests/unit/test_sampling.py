"""Temperature and top_p per model: from the configuration file and the environment, a default
of 0 for local models, and sent to the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_server.backends.local import backend as local
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.providers import builtin_providers
from acp_server.backends.sampling import TEMPERATURE_ENV, TOP_P_ENV, Sampling, chosen
from acp_server.backends.selection.select import from_provider
from acp_server.config.file import ConfigError, load_config
from acp_server.messages import ModelRequest, text_message
from acp_server.models.catalogue import build_catalogue

CONFIG = """\
[providers.box]
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"

[[models]]
provider = "box"
id = "qwen"
temperature = 0.2
top_p = 0.9

[[models]]
provider = "box"
id = "other"
"""
DONE = (
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
)


def test_the_environment_wins_over_the_file_and_local_models_default_to_zero() -> None:
    file = Sampling(0.7, 0.95)
    assert chosen(file, {}) == file
    assert chosen(file, {TEMPERATURE_ENV: "0.1", TOP_P_ENV: "0.5"}) == Sampling(0.1, 0.5)
    assert chosen(Sampling(), {}) == Sampling()
    assert chosen(Sampling(), {}, local=True) == Sampling(0.0, None)
    assert chosen(Sampling(0.4), {}, local=True) == Sampling(0.4, None)
    for wrong in ("hot", "3", "-1", "nan"):
        assert chosen(file, {TEMPERATURE_ENV: wrong}) == file


def test_the_file_sets_them_per_model(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(CONFIG, encoding="utf-8")
    catalogue = build_catalogue([], load_config(tmp_path / "c.toml", {}))
    qwen, other = catalogue.find("box:qwen"), catalogue.find("box:other")
    assert qwen is not None and qwen.sampling == Sampling(0.2, 0.9)
    assert other is not None and other.sampling == Sampling()


@pytest.mark.parametrize(
    ("line", "key"), [("temperature = 3", "temperature"), ("top_p = 0", "top_p")]
)
def test_a_value_out_of_range_is_refused_with_its_line(tmp_path: Path, line: str, key: str) -> None:
    (tmp_path / "c.toml").write_text(CONFIG + line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "c.toml", {})
    problem = caught.value.problems[0]
    assert problem.startswith("line ") and f"`models[1].{key}`" in problem


async def test_they_are_sent_with_every_request() -> None:
    bodies: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=DONE)

    request = ModelRequest((text_message("user", "hi"),))
    for model, sampling in (
        ("qwen", Sampling(0.0, 0.9)),
        ("o3", Sampling(0.0, 0.9)),
        ("q", Sampling()),
    ):
        backend = OpenAIBackend(
            "http://box/v1", model, transport=httpx.MockTransport(server), sampling=sampling
        )
        [e async for e in backend.stream(request)]
        await backend.aclose()
    assert (bodies[0]["temperature"], bodies[0]["top_p"]) == (0.0, 0.9)
    # OpenAI's reasoning models refuse them; unset, the server's default applies.
    assert "temperature" not in bodies[1] and "top_p" not in bodies[1]
    assert "temperature" not in bodies[2] and "top_p" not in bodies[2]


def test_backends_get_the_configured_and_the_local_settings() -> None:
    box = builtin_providers({})["openai"]
    made = from_provider(box, "gpt-4.1-mini", {"OPENAI_API_KEY": "k"}, sampling=Sampling(0.3))
    assert isinstance(made, OpenAIBackend) and made.sampling == Sampling(0.3)
    if local.missing("") is not None:
        pytest.skip("the local extra is not installed")
    embedded = from_provider(builtin_providers({})["local"], "", {})
    assert isinstance(embedded, local.LocalBackend) and embedded.sampling == Sampling(0.0)
    warmer = from_provider(builtin_providers({})["local"], "", {TEMPERATURE_ENV: "0.6"})
    assert isinstance(warmer, local.LocalBackend) and warmer.sampling == Sampling(0.6)
