"""`acp-server run`: the headless client of the Quick start, through real pipes end to end."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.raw import console_script


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACP_SERVER_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(
        [console_script(), "run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_script(tmp_path: Path, rounds: list[dict[str, object]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(rounds), encoding="utf-8")
    return str(path)


def test_run_prints_the_streamed_reply(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"thought": "hmm", "text": "Hello from the script."}])
    done = run(tmp_path, "--script", script, "Say hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the script.\n"  # only the answer on stdout
    assert "hmm" in done.stderr


def test_run_without_a_model_says_how_to_configure_one(tmp_path: Path) -> None:
    for port in (11434, 1234, 8080):  # the usual local model servers, which run would find
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"a local server listens on port {port}; run would use it")
    env_model = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OLLAMA_"))}
    done = subprocess.run(
        [console_script(), "run", "hello"],
        cwd=tmp_path,
        env={**env_model, "ACP_SERVER_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--model" in done.stdout and "--script" in done.stdout


def test_run_refuses_edits_it_cannot_ask_about_unless_the_mode_allows(tmp_path: Path) -> None:
    rounds: list[dict[str, object]] = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
        {"text": "ok"},
    ]
    refused = run(tmp_path, "--script", write_script(tmp_path, rounds), "write a.txt")
    assert refused.returncode == 0 and not (tmp_path / "a.txt").exists()
    assert "[permission] refused" in refused.stderr
    allowed = run(
        tmp_path, "--script", write_script(tmp_path, rounds), "--mode", "accept_edits", "go"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "x"
