"""The `local` provider's choices, without starting a model (tests/e2e/test_local_model.py
starts one)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from acp_server.backends.local import backend as local
from acp_server.backends.local import server as local_server
from acp_server.backends.providers import builtin_providers
from acp_server.backends.selection import select
from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.cli.serve import choose_backend
from acp_server.config.keys import store_key
from acp_server.messages import ModelRequest, StreamError, text_message


def test_a_gguf_path_that_does_not_exist_is_explained_before_anything_starts(
    tmp_path: Path,
) -> None:
    problem = local.missing(str(tmp_path / "nowhere.gguf"))
    assert problem is not None
    if local.missing("") is None:  # the extra is installed: the file is what is missing
        assert "nowhere.gguf" in problem and "does not exist" in problem


async def test_local_with_a_missing_file_answers_each_prompt_with_the_problem(
    tmp_path: Path,
) -> None:
    provider = builtin_providers({})["local"]
    backend = select.from_provider(provider, str(tmp_path / "nowhere.gguf"), {})
    assert isinstance(backend, UnconfiguredBackend)
    events = [e async for e in backend.stream(ModelRequest((text_message("user", "hi"),)))]
    assert isinstance(events[0], StreamError)
    assert "nowhere.gguf" in events[0].message or "llama-cpp-python" in events[0].message


def test_every_session_gets_the_same_server_for_a_model(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    first = local_server.shared(gguf, 4096, tmp_path / "log", None)
    assert local_server.shared(gguf, 4096, tmp_path / "log", None) is first
    assert local_server.shared(gguf, 2048, tmp_path / "log", None) is not first
    assert local_server.shared(gguf, 4096, tmp_path / "log", "chatml") is not first


def test_the_window_is_the_configured_n_ctx() -> None:
    assert local.n_ctx({}) == local.DEFAULT_N_CTX
    assert local.n_ctx({local.CONTEXT_ENV: "4096"}) == 4096
    assert local.n_ctx({local.CONTEXT_ENV: "many"}) == local.DEFAULT_N_CTX


def test_a_key_in_the_environment_comes_first() -> None:
    backend = select.hosted_with_key({"ANTHROPIC_API_KEY": "sk-test"})
    assert backend is not None and backend.label.startswith("anthropic:")


def test_a_key_for_another_server_is_left_to_the_probe() -> None:
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    assert select.hosted_with_key(env) is None


def test_the_embedded_model_is_the_fallback_unless_turned_off() -> None:
    assert select.embedded({local.EMBEDDED_ENV: "0"}) is None
    backend = select.embedded({})
    if local.missing("") is not None:
        assert backend is None
    else:
        assert backend is not None and backend.label == "local:SmolLM2-135M-Instruct.Q4_1"


async def test_with_nothing_configured_a_key_stored_by_login_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ACP_SERVER_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    store_key(tmp_path / "acp-server" / "config.toml", "ANTHROPIC_API_KEY", "sk-ant-stored-000111")
    backend = choose_backend(argparse.Namespace())
    await backend.context_window()  # chooses; Anthropic's backend asks nothing for it
    assert backend.label == "anthropic:claude-sonnet-4-5"


def test_the_server_threads_can_be_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = local_server.LocalServer(tmp_path / "m.gguf", 4096, tmp_path / "log", threads=2)
    argv = server.argv(1)
    assert argv[argv.index("--n_threads") + 1] == "2"
    assert "--n_threads" not in local_server.LocalServer(tmp_path / "m.gguf", 4096, tmp_path).argv(
        1
    )
    monkeypatch.setenv("ACP_SERVER_DATA_DIR", str(tmp_path / "data"))
    backend = local.LocalBackend(tmp_path / "t.gguf", {local.THREADS_ENV: "2"}, {})
    assert "--n_threads" in backend._server.argv(1)
