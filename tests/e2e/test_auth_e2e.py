"""Authentication per ACP, over real pipes (every frame checked against the schema): "Set up a
model" always listed, the key's method first when the default model lacks its key,
`auth_required` from session/new only until it is given, and `acp-server login` storing a key
that then works, which `logout` removes. The setup run itself: test_setup_terminal.py."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import Conformance
from tests.support.mock_llm import MockLLM
from tests.support.raw import RawServer, console_script

Start = Callable[..., Any]
KEY = "sk-stored-by-login-0123456789"
TERMINAL = {"auth": {"terminal": True}}


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No model settings from the developer's shell; a configuration folder of the test's own."""
    env = {
        k: ""
        for k in os.environ
        if k.startswith(("OPENAI_", "ANTHROPIC_", "OLLAMA_", "ACP_SERVER_MODEL"))
    }
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "config"), **extra}


async def initialize(server: RawServer, caps: dict[str, Any]) -> dict[str, Any]:
    answer = await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    result: dict[str, Any] = answer["result"]
    return result


async def new_session(server: RawServer, cwd: Path) -> dict[str, Any]:
    answer: dict[str, Any] = await server.request(
        "session/new", {"cwd": str(cwd), "mcpServers": []}
    )
    return answer


async def test_a_usable_model_lists_only_setup_and_needs_no_authentication(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    env = clean_env(tmp_path, OPENAI_BASE_URL=f"{mock_llm.url}/v1")
    server = await server_factory("--model", "openai:mock-model", env=env)
    result = await initialize(server, TERMINAL)
    assert [(m["id"], m["type"], m["args"]) for m in result["authMethods"]] == [
        ("setup", "terminal", ["setup"])
    ]
    assert result["agentCapabilities"]["auth"] == {"logout": {}}
    session = await new_session(server, tmp_path)  # no authenticate first
    mock_llm.queue({"text": "hello"})
    prompt = [{"type": "text", "text": "hi"}]
    params = {"sessionId": session["result"]["sessionId"], "prompt": prompt}
    reply = await server.request("session/prompt", params, timeout=30)
    assert reply["result"]["stopReason"] == "end_turn"
    assert "error" not in reply
    assert (await server.request("authenticate", {"methodId": "setup"}))["result"] == {}


async def test_a_missing_key_is_one_terminal_method_and_auth_required(
    server_factory: Start, tmp_path: Path
) -> None:
    server = await server_factory("--model", "openai:gpt-4.1-mini", env=clean_env(tmp_path))
    methods = (await initialize(server, TERMINAL))["authMethods"]
    assert [m["id"] for m in methods] == ["login", "setup"]
    assert {m["type"] for m in methods} == {"terminal"}
    assert methods[0]["args"] == ["login", "OPENAI_API_KEY"]
    assert "OPENAI_API_KEY" in methods[0]["name"]
    answer = await new_session(server, tmp_path)
    assert answer["error"]["code"] == -32000
    assert "OPENAI_API_KEY" in answer["error"]["message"]


async def test_without_terminal_auth_one_agent_method_that_authenticate_checks(
    server_factory: Start, tmp_path: Path
) -> None:
    server = await server_factory("--model", "anthropic:claude-sonnet-4-5", env=clean_env(tmp_path))
    methods = (await initialize(server, {}))["authMethods"]
    assert [m["id"] for m in methods] == ["env:ANTHROPIC_API_KEY", "setup"]
    assert all("type" not in m for m in methods)  # agent methods: the schema's default
    assert "acp-server setup" in methods[1]["description"]
    for method in ("env:ANTHROPIC_API_KEY", "setup"):
        answer = await server.request("authenticate", {"methodId": method})
        assert answer["error"]["code"] == -32000
        assert "ANTHROPIC_API_KEY" in answer["error"]["message"]
    answer = await server.request("authenticate", {"methodId": "login"})
    assert answer["error"]["code"] == -32602


def write_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config" / "acp-server" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "# my models\n"
        'default_model = "mock:mock-model"\n\n'
        "[providers.mock]\n"
        'dialect = "openai"\n'
        f'base_url = "{url}/v1"\n'
        'api_key_env = "MOCK_KEY"\n',
        encoding="utf-8",
    )
    return path


def cli(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), *args],
        input=stdin,
        env={**os.environ, **clean_env(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )


async def test_login_stores_a_key_that_works_and_logout_removes_it(
    server_factory: Start,
    mock_llm: MockLLM,
    conformance: Conformance,
    tmp_path: Path,
    private_data_dir: Path,
) -> None:
    config = write_config(tmp_path, mock_llm.url)
    before = await server_factory(env=clean_env(tmp_path))
    methods = (await initialize(before, TERMINAL))["authMethods"]
    assert methods[0]["args"] == ["login", "MOCK_KEY"]
    done = cli(tmp_path, *methods[0]["args"], stdin=KEY + "\n")  # as the editor runs it
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and KEY not in done.stderr
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    text = config.read_text("utf-8")
    assert text.startswith("# my models\n") and "[providers.mock]" in text

    server = await server_factory(env=clean_env(tmp_path))
    assert [m["id"] for m in (await initialize(server, TERMINAL))["authMethods"]] == ["setup"]
    session = (await new_session(server, tmp_path))["result"]["sessionId"]
    mock_llm.queue({"text": "hello"})
    prompt = [{"type": "text", "text": "hi"}]
    reply = await server.request(
        "session/prompt", {"sessionId": session, "prompt": prompt}, timeout=30
    )
    assert reply["result"]["stopReason"] == "end_turn"
    assert mock_llm.chat_requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert (await server.request("logout", {}))["result"] == {}
    assert KEY not in config.read_text("utf-8") and "[providers.mock]" in config.read_text("utf-8")

    await server.stop()
    assert not any(KEY in line for _side, line in conformance.observed)
    for path in private_data_dir.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path
    after = await server_factory(env=clean_env(tmp_path))
    assert [m["id"] for m in (await initialize(after, TERMINAL))["authMethods"]] == [
        "login",
        "setup",
    ]


def test_logout_on_the_command_line_removes_only_the_stored_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    assert cli(tmp_path, "login", "MOCK_KEY", stdin=KEY + "\n").returncode == 0
    done = cli(tmp_path, "logout")
    assert done.returncode == 0 and "MOCK_KEY" in done.stderr
    text = config.read_text("utf-8")
    assert KEY not in text and 'api_key_env = "MOCK_KEY"' in text


def test_terminal_login_works_when_the_editor_launches_the_acp_subcommand(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    # Editors configured with `args = ["acp"]` run `acp-server acp login MOCK_KEY`.
    done = cli(tmp_path, "acp", "login", "MOCK_KEY", stdin=KEY + "\n")
    assert done.returncode == 0, done.stderr
    assert KEY in config.read_text("utf-8")
