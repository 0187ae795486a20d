"""`acp-server setup`, the "Set up a model" authentication method, as an editor runs it: on a
real pseudo-terminal, a provider picked, its key typed without being echoed and stored (mode
0600, the file's other lines kept), exit 0; then `authenticate` with that method succeeds on a
server over real pipes (every frame checked against the schema). And what the ACP registry's
check sees at `initialize` with no keys and an empty HOME: a method it accepts."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.test_auth_e2e import TERMINAL, initialize, new_session
from tests.support.child import default_sigint, read_until
from tests.support.mock_llm import MockLLM
from tests.support.raw import console_script

Start = Callable[..., Any]
KEY = "sk-typed-at-setup-0123456789"
# The capabilities the registry's auth check sends (agentclientprotocol/registry,
# .github/workflows/client.py): no `auth.terminal`, a `_meta` hint instead.
REGISTRY_CHECK = {
    "terminal": True,
    "fs": {"readTextFile": True, "writeTextFile": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}


def empty_home_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No model settings, no keys, and a HOME (so a configuration folder) with nothing in it."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "OLLAMA_", "ACP_SERVER_MODEL", "XDG_CONFIG"))
    }
    return {**env, "HOME": str(home), "ACP_SERVER_DISCOVER": "0", **extra}


def config_of(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".config" / "acp-server" / "config.toml"


async def test_with_no_keys_and_an_empty_home_initialize_lists_a_terminal_method(
    server_factory: Start, tmp_path: Path
) -> None:
    env = empty_home_env(tmp_path)
    server = await server_factory(env=env, cwd=str(tmp_path))
    methods = (await initialize(server, TERMINAL))["authMethods"]
    assert {"id": "setup", "type": "terminal", "args": ["setup"]}.items() <= methods[0].items()
    assert "result" in await new_session(server, tmp_path)  # no model yet, still no auth_required

    registry = await server_factory(env=env, cwd=str(tmp_path))
    listed = (await initialize(registry, REGISTRY_CHECK))["authMethods"]
    # The registry takes a missing `type` as "agent"; a terminal method is only for auth.terminal.
    assert [m.get("type", "agent") for m in listed] == ["agent"]
    assert listed[0]["id"] == "setup"


def write_config(tmp_path: Path) -> Path:
    path = config_of(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        '# my settings\ndefault_mode = "ask"\ndefault_model = "anthropic:claude-sonnet-4-5"\n',
        encoding="utf-8",
    )
    return path


def on_terminal(tmp_path: Path, env: dict[str, str], answers: dict[str, str]) -> tuple[int, str]:
    """Run `acp-server setup` with stdin and stderr on a pseudo-terminal (its own session, so
    the key is read from it), typing each answer when its question appears; the exit status
    and everything the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [console_script(), "setup"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    with proc:
        try:
            shown = _converse(leader, answers)
        finally:
            os.close(leader)
            if proc.poll() is None:
                proc.kill()
        out, _ = proc.communicate(timeout=30)
        assert out == b"", "setup wrote to stdout"
    return proc.returncode, shown


def _converse(leader: int, answers: dict[str, str]) -> str:
    shown, pending = "", dict(answers)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if not ready:
            continue
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal's last user is gone: setup has exited
            break
        if not data:
            break
        shown += data.decode(errors="replace")
        for question in [q for q in pending if q in shown]:
            answer = pending.pop(question)
            if question == "Choose":
                answer = _number_of(shown, answer)
            os.write(leader, answer.encode() + b"\n")
    assert not pending, shown
    return shown


def _number_of(shown: str, label: str) -> str:
    """The number the list gives the line that mentions `label` (the list depends on what is
    installed and running here; the hosted APIs are always in it)."""
    found = re.search(rf"^\s*(\d+)\. .*{re.escape(label)}", shown, re.MULTILINE)
    assert found is not None, shown
    return found.group(1)


async def test_setup_on_a_terminal_stores_the_key_and_authenticate_then_succeeds(
    server_factory: Start, tmp_path: Path
) -> None:
    config = write_config(tmp_path)
    env = empty_home_env(tmp_path)
    waiting = await server_factory(env=env, cwd=str(tmp_path))
    methods = (await initialize(waiting, TERMINAL))["authMethods"]
    assert [m["id"] for m in methods] == ["login", "setup"]  # the key is missing, and setup
    answer = await waiting.request("authenticate", {"methodId": "setup"})
    assert answer["error"]["code"] == -32000 and "ANTHROPIC_API_KEY" in answer["error"]["message"]

    answers = {"Choose": "OpenAI's API", "typing is not shown": KEY, "Model (Enter": ""}
    code, shown = on_terminal(tmp_path, env, answers)
    assert code == 0, shown
    assert KEY not in shown  # not echoed, not printed
    assert "What `acp-server doctor` sees" in shown and "Key: OPENAI_API_KEY is set" in shown
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    text = config.read_text("utf-8")
    assert text.startswith('# my settings\ndefault_mode = "ask"\n')
    assert 'default_model = "openai:gpt-4.1-mini"' in text and "claude" not in text
    assert f'OPENAI_API_KEY = "{KEY}"' in text

    # The server that was waiting reads the file again: the same method now succeeds.
    assert (await waiting.request("authenticate", {"methodId": "setup"}))["result"] == {}
    assert "result" in await new_session(waiting, tmp_path)
    again = await server_factory(env=env, cwd=str(tmp_path))
    assert [m["id"] for m in (await initialize(again, TERMINAL))["authMethods"]] == ["setup"]


def test_setup_leaves_everything_as_it_is_when_nothing_is_chosen(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    before = config.read_text("utf-8")
    done = subprocess.run(
        [console_script(), "acp", "setup"],  # appended to an editor's `acp-server acp`
        input="9\n\n",
        env=empty_home_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "Please type a number" in done.stderr and "nothing changed" in done.stderr
    assert config.read_text("utf-8") == before and done.stdout == ""


async def test_setup_chooses_a_model_server_found_on_this_machine(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    base = f"{mock_llm.url}/v1"
    env = empty_home_env(tmp_path, OPENAI_BASE_URL=base, ACP_SERVER_DISCOVER="1")
    # The mock answers on the test's event loop: the terminal is driven from a thread.
    answers = {"Choose": f"openai:mock-model: found on a model server at {base}"}
    code, shown = await asyncio.to_thread(on_terminal, tmp_path, env, answers)
    assert code == 0, shown
    assert "typing is not shown" not in shown  # a local server needs no key
    text = config_of(tmp_path).read_text("utf-8")
    assert text == 'default_model = "openai:mock-model"\n'
    assert "Model: new sessions start with openai:mock-model" in shown

    server = await server_factory(env=env, cwd=str(tmp_path))
    assert [m["id"] for m in (await initialize(server, TERMINAL))["authMethods"]] == ["setup"]
    assert (await server.request("authenticate", {"methodId": "setup"}))["result"] == {}
    session = (await new_session(server, tmp_path))["result"]["sessionId"]
    mock_llm.queue({"text": "hello from the server found"})
    prompt = [{"type": "text", "text": "hi"}]
    reply = await server.request(
        "session/prompt", {"sessionId": session, "prompt": prompt}, timeout=30
    )
    assert reply["result"]["stopReason"] == "end_turn"
    assert mock_llm.chat_requests[-1].json["model"] == "mock-model"


def test_ctrl_c_ends_setup_with_a_sentence_and_no_traceback(tmp_path: Path) -> None:
    # default_sigint: a test run started with `nohup … &` has SIGINT ignored, and so had setup,
    # which then never ended: the test read its stderr for ever.
    with subprocess.Popen(
        [console_script(), "setup"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=empty_home_env(tmp_path),
        preexec_fn=default_sigint,
    ) as proc:
        assert proc.stderr is not None
        try:
            read_until(proc.stderr.fileno(), lambda shown: b"Choose" in shown)
            proc.send_signal(signal.SIGINT)
            rest = read_until(proc.stderr.fileno()).decode(errors="replace")
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, rest
    assert "interrupted" in rest and "Traceback" not in rest
    assert not config_of(tmp_path).exists()


def test_setup_offers_a_local_model_that_can_use_tools(tmp_path: Path) -> None:
    from acp_server.backends.local import backend as local
    from tests.unit.test_backends_local_gguf import WITH_TOOLS, write_gguf

    if local.missing("") is not None:
        import pytest

        pytest.skip("the local extra is not installed: no local model is offered")
    gguf = write_gguf(tmp_path / "qwen2.5-coder-1.5b.gguf", WITH_TOOLS)
    answers = {"Choose": "A local model that can use tools", "Path of the .gguf": str(gguf)}
    code, shown = on_terminal(tmp_path, empty_home_env(tmp_path), answers)
    assert code == 0, shown
    assert "1.1 GB" in shown and "4 GB of memory" in shown and "huggingface.co/Qwen" in shown
    assert config_of(tmp_path).read_text("utf-8") == f'default_model = "local:{gguf}"\n'
