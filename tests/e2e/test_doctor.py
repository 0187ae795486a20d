"""`acp-server doctor` run as a person runs it (the console script), against real HTTP mock
servers on 127.0.0.1: nothing configured, a server up, a server down, a bad key, a broken
configuration file, a model that is not there, and `--live` against a model that calls a tool.
Each asserts the lines and the exit code."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.support.mock_llm import MockLLM, running_mock_llm
from tests.support.raw import console_script

CLEARED = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "ACP_SERVER_MODEL",
    "ACP_SERVER_CONFIG",
)


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with nothing set up (no keys, no file, no discovery)."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), ACP_SERVER_DISCOVER="0")
    env["ACP_SERVER_EMBEDDED"] = "0"  # the `local` extra is installed here: leave it out
    env["PYTHONIOENCODING"] = "utf-8"
    return env


async def doctor(env: dict[str, str], *args: str) -> tuple[int, list[str], str]:
    """The exit code, the lines on stdout and what went to stderr."""
    proc = await asyncio.create_subprocess_exec(
        console_script(),
        "doctor",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode("utf-8").splitlines(), err.decode("utf-8")


def line(lines: list[str], start: str) -> str:
    """The one line that starts with `start`."""
    found = [text for text in lines if text.startswith(start)]
    assert len(found) == 1, f"{start!r} in:\n" + "\n".join(lines)
    return found[0]


def advice(lines: list[str], start: str) -> str:
    """The advice lines below the line that starts with `start`."""
    index = lines.index(line(lines, start))
    below = []
    for text in lines[index + 1 :]:
        if not text.startswith("    → "):
            break
        below.append(text.removeprefix("    → "))
    return "\n".join(below)


def openai_env(env: dict[str, str], mock: MockLLM, key: str = "") -> dict[str, str]:
    more = {"OPENAI_BASE_URL": f"{mock.url}/v1", "ACP_SERVER_MODEL": "openai:mock-model"}
    return {**env, **more, **({"OPENAI_API_KEY": key} if key else {})}


async def test_nothing_configured_says_how_to_get_a_model(clean_env: dict[str, str]) -> None:
    code, lines, err = await doctor(clean_env)
    assert code == 1 and err == ""
    assert line(lines, "✔ Configuration file: none at")
    assert line(lines, "✘ Model: none is named")
    assert "ollama pull" in advice(lines, "✘ Model:")
    assert "OPENAI_API_KEY" in advice(lines, "✘ Model:")
    assert line(lines, "✔ Session store: ")
    assert line(lines, "✔ Remembered permissions: ")
    assert line(lines, "✔ Log file: ")
    assert lines[-1].startswith("1 problem")


async def test_the_embedded_model_is_what_a_bare_install_with_the_local_extra_uses(
    clean_env: dict[str, str],
) -> None:
    code, lines, _ = await doctor({**clean_env, "ACP_SERVER_EMBEDDED": "1"})
    assert "✔ Model: none is named and no local model server answered" in lines[2], lines
    assert "embedded SmolLM2-135M" in lines[2] and "offline" in lines[2]
    assert code == 0, lines


async def test_a_server_that_is_up_with_the_model_passes(
    clean_env: dict[str, str], mock_llm: MockLLM
) -> None:
    mock_llm.set(context_length=32768)
    code, lines, _ = await doctor(openai_env(clean_env, mock_llm))
    assert code == 0, "\n".join(lines)
    assert line(lines, "✔ Model: new sessions start with openai:mock-model")
    assert line(lines, f"✔ Provider openai at {mock_llm.url}/v1: answers (1 model)")
    found = line(lines, "✔ Model openai:mock-model: served")
    assert f"context window 32,768 tokens, from the server (GET {mock_llm.url}/v1/models)" in found
    assert "tool calling not tried" in found
    assert lines[-1].startswith("No problem found")
    assert not mock_llm.chat_requests, "without --live nothing is asked of the model"


async def test_a_hosted_model_whose_server_tells_no_window_gets_the_catalogues(
    clean_env: dict[str, str], mock_llm: MockLLM
) -> None:
    mock_llm.set(models=["gpt-4.1"])  # listed as api.openai.com lists it: no window
    env = {**openai_env(clean_env, mock_llm), "ACP_SERVER_MODEL": "openai:gpt-4.1"}
    code, lines, _ = await doctor(env)
    assert code == 0, "\n".join(lines)
    found = line(lines, "✔ Model openai:gpt-4.1: served")
    assert "context window 1,047,576 tokens, from the model catalogue (LiteLLM " in found
    code, lines, _ = await doctor({**env, "ACP_SERVER_CONTEXT_WINDOW": "50000"})
    found = line(lines, "✔ Model openai:gpt-4.1: served")
    assert "context window 50,000 tokens, as ACP_SERVER_CONTEXT_WINDOW sets it (1,047,576" in found


async def test_a_server_that_is_down_is_said_with_what_to_do(clean_env: dict[str, str]) -> None:
    async with running_mock_llm() as gone:
        pass  # its port is closed now
    code, lines, _ = await doctor(openai_env(clean_env, gone))
    assert code == 1
    down = line(lines, f"✘ Provider openai at {gone.url}/v1: cannot be reached")
    assert "connection refused" in down
    assert "OPENAI_BASE_URL" in advice(lines, "✘ Provider openai")


async def test_a_key_the_server_refuses_is_named_and_never_shown(
    clean_env: dict[str, str],
) -> None:
    wrong = "sk-wrong-0123456789abcdef"
    async with running_mock_llm(api_key="sk-right-0123456789abcdef") as mock:
        code, lines, err = await doctor(openai_env(clean_env, mock, wrong))
    assert code == 1
    assert line(lines, "✘ Provider openai at").endswith(
        "refuses the key in OPENAI_API_KEY (HTTP 401)"
    )
    assert "wrong or expired" in advice(lines, "✘ Provider openai")
    assert wrong not in "\n".join(lines) + err


async def test_a_key_the_server_accepts_is_said_to_be_accepted(
    clean_env: dict[str, str],
) -> None:
    key = "sk-right-0123456789abcdef"
    async with running_mock_llm(api_key=key) as mock:
        code, lines, err = await doctor(openai_env(clean_env, mock, key))
    assert code == 0, "\n".join(lines)
    assert "the key in OPENAI_API_KEY is accepted" in line(lines, "✔ Provider openai at")
    assert key not in "\n".join(lines) + err


async def test_a_key_stored_by_setup_counts_and_a_bare_default_model_is_the_one_checked(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    """What `acp-server setup` writes: `default_model` without a [[models]] entry, the key in
    [keys]. A session uses both; the doctor must see them too."""
    key = "sk-stored-0123456789abcdef"
    async with running_mock_llm(api_key=key) as mock:
        config = tmp_path / "config" / "acp-server" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            'default_model = "mock:mock-model"\n\n[providers.mock]\ndialect = "openai"\n'
            f'base_url = "{mock.url}/v1"\napi_key_env = "MOCK_KEY"\n\n'
            f'[keys]\nMOCK_KEY = "{key}"\n',
            encoding="utf-8",
        )
        code, lines, err = await doctor(clean_env)
    assert code == 0, "\n".join(lines)
    assert line(lines, "✔ Model: new sessions start with mock:mock-model (the default_model)")
    assert "the key in MOCK_KEY is accepted" in line(lines, "✔ Provider mock at")
    assert key not in "\n".join(lines) + err


async def test_a_broken_configuration_file_is_named_with_key_and_line(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "openai:x"\n\n[providers.openai]\nbase_ulr = "http://h"\n')
    code, lines, _ = await doctor(clean_env, "--config", str(config))
    assert code == 1
    assert line(lines, f"✘ Configuration file: {config} cannot be used")
    said = advice(lines, "✘ Configuration file")
    assert "line 4, `providers.openai.base_ulr`: unknown setting" in said
    assert "acp-server config" in said


async def test_a_model_the_server_does_not_have_is_named_with_what_it_has(
    clean_env: dict[str, str], mock_llm: MockLLM
) -> None:
    env = {**openai_env(clean_env, mock_llm), "ACP_SERVER_MODEL": "openai:no-such-model"}
    code, lines, _ = await doctor(env)
    assert code == 1
    assert line(lines, "✘ Model openai:no-such-model: not on its server")
    assert "That server has: mock-model." in advice(lines, "✘ Model openai:no-such-model")


async def test_live_sees_the_model_call_a_tool(
    clean_env: dict[str, str], mock_llm: MockLLM
) -> None:
    mock_llm.queue({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
    code, lines, _ = await doctor(openai_env(clean_env, mock_llm), "--live")
    assert code == 0, "\n".join(lines)
    assert line(lines, "✔ Live test of openai:mock-model: it answered and called the tool")
    (asked,) = mock_llm.chat_requests
    assert [t["function"]["name"] for t in asked.json["tools"]] == ["get_weather"]


async def test_live_fails_a_model_that_only_talks(
    clean_env: dict[str, str], mock_llm: MockLLM
) -> None:
    mock_llm.queue({"text": "It is sunny in Paris."})
    code, lines, _ = await doctor(openai_env(clean_env, mock_llm), "--live")
    assert code == 1
    assert line(lines, "✘ Live test of openai:mock-model: it answered in words")
    assert "calls tools" in advice(lines, "✘ Live test")


async def test_an_ollama_model_without_tool_calling_is_a_problem(
    clean_env: dict[str, str], mock_llm: MockLLM
) -> None:
    mock_llm.set(model="tiny:1b", capabilities=["completion"], context_length=4096)
    env = {**clean_env, "OLLAMA_HOST": mock_llm.url, "ACP_SERVER_MODEL": "ollama:tiny:1b"}
    code, lines, _ = await doctor(env)
    assert code == 1
    assert line(lines, "✘ Model ollama:tiny:1b: cannot call tools")


async def test_plain_ascii_when_stdout_cannot_show_the_symbols(
    clean_env: dict[str, str],
) -> None:
    code, lines, _ = await doctor({**clean_env, "PYTHONIOENCODING": "ascii"})
    assert code == 1
    assert line(lines, "[x] Model: none is named")
    assert line(lines, "[ok] Session store: ")
    assert all(text.isascii() for text in lines)


async def test_a_hosted_model_without_its_key_says_which_variable(
    clean_env: dict[str, str],
) -> None:
    """Nothing is sent: OpenAI's own API without a key would only refuse it."""
    code, lines, _ = await doctor({**clean_env, "ACP_SERVER_MODEL": "openai:gpt-4.1-mini"})
    assert code == 1
    assert line(lines, "✘ Provider openai at https://api.openai.com/v1: OPENAI_API_KEY is not set")
    assert "https://platform.openai.com/api-keys" in advice(lines, "✘ Provider openai")


async def test_a_server_that_wants_a_key_names_the_variable_to_set(
    clean_env: dict[str, str],
) -> None:
    async with running_mock_llm(api_key="sk-right-0123456789abcdef") as mock:
        code, lines, _ = await doctor(openai_env(clean_env, mock))
    assert code == 1
    assert line(lines, "✘ Provider openai at").endswith(
        "wants an API key (HTTP 401), and OPENAI_API_KEY is not set"
    )
    assert "Set OPENAI_API_KEY" in advice(lines, "✘ Provider openai")


MCP_SERVER = Path(__file__).parent.parent / "support" / "mcp_server.py"


async def test_the_configuration_files_mcp_servers_get_a_line_each(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp_servers.docs]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(MCP_SERVER))}]\n\n"
        '[mcp_servers.gone]\ncommand = "/nonexistent/docs-mcp"\nargs = ["--stdio"]\n',
        encoding="utf-8",
    )
    async with running_mock_llm() as mock:
        code, lines, err = await doctor(openai_env(clean_env, mock), "--config", str(config))
    assert code == 1, "\n".join(lines)
    docs = line(lines, f"✔ MCP server docs (stdio: {sys.executable} {MCP_SERVER})")
    assert "connected in" in docs and re.search(r", 6 tools, ~\d+ tokens$", docs), docs
    assert line(lines, "✘ MCP server gone (stdio: /nonexistent/docs-mcp --stdio): not available")
    said = advice(lines, "✘ MCP server gone")
    assert "'/nonexistent/docs-mcp' could not be started" in said, said
    assert "acp-server doctor --mcp" in said
    assert "Traceback" not in err


async def test_no_mcp_servers_no_mcp_line_and_no_mcp_import(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "openai:mock-model"\n', encoding="utf-8")
    async with running_mock_llm() as mock:
        env = openai_env(clean_env, mock)
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-X", "importtime", "-m", "acp_server", "doctor"],
            *["--config", str(config)],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    lines = out.decode("utf-8").splitlines()
    assert line(lines, "✔ Configuration file:")  # it ran its checks
    assert not [text for text in lines if "MCP" in text]
    imported = [row.rsplit("|", 1)[-1].strip() for row in err.decode().splitlines()]
    assert "acp_server.doctor.setup" in imported  # -X importtime did list the imports
    assert not [name for name in imported if name == "mcp" or name.startswith("mcp.")]


async def test_the_sandbox_in_force_is_said_and_why(clean_env: dict[str, str]) -> None:
    env = {**clean_env, "ACP_SERVER_SANDBOX": "workspace-write"}
    _, lines, _ = await doctor({**env, "ACP_SERVER_SANDBOX_WITH": "landlock"})
    assert line(lines, "✔ Sandbox workspace-write, kept by landlock"), lines
    assert "(from ACP_SERVER_SANDBOX)" in next(x for x in lines if "Sandbox" in x)
    _, lines, _ = await doctor({**env, "ACP_SERVER_SANDBOX_WITH": "none"})
    off = "! Sandbox workspace-write cannot be kept while ACP_SERVER_SANDBOX_WITH=none switches"
    assert line(lines, off), lines
    said = advice(lines, "! Sandbox")  # switched off, not missing: bubblewrap is not blamed
    assert "Unset ACP_SERVER_SANDBOX_WITH" in said and "bubblewrap" not in said, said
    _, lines, _ = await doctor({**clean_env, "ACP_SERVER_SANDBOX": "off"})
    assert line(lines, "✔ Sandbox off"), lines
