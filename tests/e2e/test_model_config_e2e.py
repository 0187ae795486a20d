"""Models from the configuration file and from discovery, through the real `acp-server`.

- the `session/new` answer is written before anything about that session (the raw wire order),
  with discovery announcing the models of a local server after it;
- a broken configuration file reaches the user in words, key and line named, both through
  `acp-server config` and through a session (a notice, and the first prompt's failure), and
  never as a crash or a line on stderr;
- a fixed file is picked up by the next session without a restart.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_backends_e2e import Start, endpoint_env, message_text, updates_of
from tests.support.mock_llm import MockLLM
from tests.support.raw import RawServer, console_script

NOTICES: dict[str, Any] = {"session": {"notices": {}}}
# Five broken files: the key and line each one's error must name.
BROKEN = {
    "wrong type": (
        '[[models]]\nprovider = "openai"\nid = "a"\nwindow = "large"\n',
        "line 4, `models[0].window`",
    ),
    "misspelt key": (
        '[providers.gateway]\ndialect = "openai"\nbase_url = "https://gw.example/v1"\n'
        'api_key_envv = "GW_KEY"\n',
        "line 4, `providers.gateway.api_key_envv`",
    ),
    "a key in the file": ('[providers.openai]\napi_key = "sk-secret-123"\n', "line 2"),
    "no such provider": ('[[models]]\nid = "x"\nprovider = "gatway"\n', "line 3"),
    "not TOML": ('[[models]]\nprovider = "openai"\nwindow = \n', "line 3 (at `window`)"),
}


async def start(server_factory: Start, mock: MockLLM, *args: str, **env: str) -> RawServer:
    server: RawServer = await server_factory(*args, env=endpoint_env("openai", mock, **env))
    caps = {"protocolVersion": 1, "clientCapabilities": NOTICES}
    await server.request("initialize", caps)
    return server


async def test_the_new_session_answer_comes_before_anything_about_that_session(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.set(models=["qwen3:8b", "llava:7b"])
    server = await start(server_factory, mock_llm, "--model", "openai:model-a")
    req = await server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    answer, _ = await server.response(req)
    session = answer["result"]["sessionId"]
    [model] = [o for o in answer["result"]["configOptions"] if o["id"] == "model"]
    assert model["currentValue"] == "openai:model-a"

    def discovered(frame: dict[str, Any]) -> bool:
        update = frame.get("params", {}).get("update", {})
        return bool(update.get("sessionUpdate") == "config_option_update")

    await server.until(discovered, timeout=10)
    order = [
        "answer" if frame.get("id") == req and "method" not in frame else "update"
        for frame in server.seen
        if frame.get("id") == req or frame.get("params", {}).get("sessionId") == session
    ]
    assert order[0] == "answer" and "update" in order
    update = [f for f in server.seen if discovered(f)][-1]["params"]["update"]
    [grown] = [o for o in update["configOptions"] if o["id"] == "model"]
    values = [v["value"] for group in grown["options"] for v in group["options"]]
    # The mock answers both as Ollama and as the local OpenAI-compatible server it also is.
    assert values[0] == "openai:model-a"
    assert {"ollama:qwen3:8b", "ollama:llava:7b", "openai:qwen3:8b"} <= set(values)
    assert grown["currentValue"] == "openai:model-a"


@pytest.mark.parametrize("case", list(BROKEN))
def test_acp_server_config_names_the_key_and_the_line(tmp_path: Path, case: str) -> None:
    text, where = BROKEN[case]
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [console_script(), "config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert str(path) in done.stderr and where in done.stderr
    assert done.stderr.count("\n  - ") == 1  # one problem, one error
    assert "sk-secret-123" not in done.stderr


def test_acp_server_config_prints_the_effective_configuration(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'default_mode = "plan"\n[providers.gateway]\ndialect = "openai"\n'
        'base_url = "https://gw.example/v1"\napi_key_env = "GW_KEY"\n'
        'headers = { Authorization = "Bearer hidden-token" }\n',
        encoding="utf-8",
    )
    env = {**os.environ, "GW_KEY": "sk-live-999"}
    done = subprocess.run(
        [console_script(), "config", "--config", str(path), "--model", "gateway:m1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert 'api_key_env = "GW_KEY"  # set' in done.stdout
    assert "hidden-token" not in done.stdout and "sk-live-999" not in done.stdout
    assert "New sessions start with gateway:m1" in done.stdout


@pytest.mark.parametrize("case", list(BROKEN))
async def test_a_broken_file_reaches_the_user_through_the_session(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, case: str
) -> None:
    text, where = BROKEN[case]
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    server = await start(
        server_factory, mock_llm, "--model", "openai:model-a", ACP_SERVER_CONFIG=str(path)
    )
    req = await server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    answer, _ = await server.response(req)
    session = answer["result"]["sessionId"]
    frames = await server.until(lambda f: f.get("method") == "session/update")
    notice = frames[-1]["params"]["update"]
    assert notice["sessionUpdate"] == "notice" and where in notice["title"]
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}
    req = await server.call("session/prompt", params)
    answer, before = await server.response(req)
    assert where in message_text(updates_of(before))
    assert answer["result"]["_meta"]["acpServer"]["turnFailed"]["reason"] == "model"
    assert mock_llm.chat_requests == []
    path.write_text('default_mode = "plan"\n', encoding="utf-8")  # fixed: the next session works
    fixed = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert fixed["result"]["modes"]["currentModeId"] == "plan"
    mock_llm.queue({"text": "Hello."})
    params["sessionId"] = fixed["result"]["sessionId"]
    answer = await server.request("session/prompt", params)
    assert answer["result"]["stopReason"] == "end_turn"
    await server.close_stdin()
    assert await server.wait() == 0
    assert await server.stderr_text() == ""


async def test_models_from_the_environment_and_the_file_are_offered_in_order(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'default_model = "ollama:qwen3:8b"\n[[models]]\nprovider = "ollama"\nid = "qwen3:8b"\n'
        'name = "Qwen 3"\nwindow = 40960\n',
        encoding="utf-8",
    )
    models = "openai:model-a, anthropic:claude-b"
    server = await start(
        server_factory,
        mock_llm,
        ACP_SERVER_CONFIG=str(path),
        ACP_SERVER_MODEL=models,
        ACP_SERVER_DISCOVER="0",
    )
    answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    [model] = [o for o in answer["result"]["configOptions"] if o["id"] == "model"]
    assert model["currentValue"] == "openai:model-a"  # the first named wins over the file
    groups = {g["group"]: [v["name"] for v in g["options"]] for g in model["options"]}
    assert groups == {"openai": ["model-a"], "anthropic": ["claude-b"], "ollama": ["Qwen 3"]}


def test_help_names_the_new_flags() -> None:
    done = subprocess.run(
        [console_script(), "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "--config FILE" in done.stdout and "repeat it" in done.stdout
    assert "ACP_SERVER_CONFIG" in done.stdout and "acp-server config" in done.stdout
