"""`acp-server run`: the headless client of the Quick start, through real pipes end to end.

What `run` promises a script that calls it: the reply, and only the reply, on stdout; every
failure on stderr with an exit code that tells it apart from an answer (see `run --help`).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.mock_llm import MockLLM
from tests.support.raw import console_script

# Endpoint settings a developer's shell may carry; every test starts from none of them.
MODEL_VARIABLES = ("OPENAI_", "OLLAMA_", "ANTHROPIC_", "ACP_SERVER_MODEL", "ACP_SERVER_SCRIPT")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(MODEL_VARIABLES)}
    return {**env, "ACP_SERVER_DATA_DIR": str(tmp_path / "data"), **extra}


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), "run", *args],
        cwd=tmp_path,
        env=clean_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_script(tmp_path: Path, rounds: list[dict[str, object]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(rounds), encoding="utf-8")
    return str(path)


def free_port() -> int:
    """A port nothing listens on (bound and released: connecting to it is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_run_prints_the_streamed_reply(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"thought": "hmm", "text": "Hello from the script."}])
    done = run(tmp_path, "--script", script, "Say hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the script.\n"  # only the answer on stdout
    assert "hmm" in done.stderr


def test_run_passes_its_serving_options_on(tmp_path: Path) -> None:
    # The server it starts gets the same settings, as numbers where they are numbers.
    script = write_script(tmp_path, [{"text": "Fine."}])
    done = run(
        tmp_path, "--script", script, "--context-window", "32768", "--max-turn-requests", "3", "Hi"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Fine.\n"


def test_run_separates_the_replies_of_separate_model_rounds(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    rounds: list[dict[str, object]] = [
        {
            "text": "Reading.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
        },
        {"text": "Done."},
    ]
    done = run(tmp_path, "--script", write_script(tmp_path, rounds), "read it")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Reading.\n\nDone.\n"


def test_run_without_a_model_fails_and_says_how_to_configure_one(tmp_path: Path) -> None:
    for port in (11434, 1234, 8080):  # the usual local model servers, which run would find
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"a local server listens on port {port}; run would use it")
    done = run(tmp_path, "hello", ACP_SERVER_EMBEDDED="0")  # the extra is installed, switched off
    assert done.returncode == 1
    assert done.stdout == ""  # the advice is not an answer
    assert "--model PROVIDER:MODEL" in done.stderr and "DIALECT" not in done.stderr
    assert "switched off (ACP_SERVER_EMBEDDED=0" in done.stderr
    assert "not installed" not in done.stderr


def test_run_against_an_unreachable_model_server_fails(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        "--model",
        "openai:some-model",
        "hello",
        OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
        ACP_SERVER_RETRY_ATTEMPTS="2",
        ACP_SERVER_RETRY_BASE_DELAY="0.01",
    )
    assert done.returncode == 1
    assert done.stdout == ""  # neither the retry notice nor the failure is part of a reply
    assert "retrying" in done.stderr and "Could not connect" in done.stderr


async def test_run_reports_a_model_failure_after_retries_on_stderr(
    tmp_path: Path, mock_llm: MockLLM
) -> None:
    mock_llm.queue(*[{"fault": "status", "status": 503}] * 2)
    proc = await asyncio.create_subprocess_exec(
        console_script(),
        "run",
        "--model",
        "openai:mock-model",
        "hello",
        cwd=tmp_path,
        env=clean_env(
            tmp_path,
            OPENAI_BASE_URL=f"{mock_llm.url}/v1",
            OPENAI_API_KEY="sk-mock",
            ACP_SERVER_RETRY_ATTEMPTS="2",
            ACP_SERVER_RETRY_BASE_DELAY="0.01",
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert out == b""
    assert b"503" in err and b"gave up after 2 attempts" in err


def test_run_keeps_a_partial_reply_and_reports_the_failure_apart(tmp_path: Path) -> None:
    rounds: list[dict[str, object]] = [{"text": "The first half", "error": "The stream broke."}]
    done = run(tmp_path, "--script", write_script(tmp_path, rounds), "go")
    assert done.returncode == 1
    assert done.stdout == "The first half\n"
    assert "The stream broke." in done.stderr


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
)
def test_run_on_a_hosted_api_without_a_key_names_the_variable_at_once(
    tmp_path: Path, model: str, variable: str
) -> None:
    # Retries would take seconds: the attempt count makes a network try show as a notice.
    done = run(tmp_path, "--model", model, "hello", ACP_SERVER_RETRY_ATTEMPTS="3")
    assert done.returncode == 1
    assert done.stdout == ""
    assert variable in done.stderr
    assert "retrying" not in done.stderr and "connect" not in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "gpt-4"], "PROVIDER:MODEL"),
        (["--script", "missing.json"], "Cannot read the script"),
        (["--script", "broken.json"], "not valid JSON"),
        (["--script", "ok.json", "--cwd", "no/such/dir"], "no/such/dir"),
        (["--script", "ok.json", "--max-turn-requests", "0"], "at least 1"),
        (["--script", "ok.json", "--max-turn-requests", "-3"], "at least 1"),
    ],
)
def test_run_refuses_a_wrong_command_line_with_exit_2(
    tmp_path: Path, args: list[str], says: str
) -> None:
    (tmp_path / "broken.json").write_text('[{"text": ', encoding="utf-8")
    (tmp_path / "ok.json").write_text('[{"text": "fine"}]', encoding="utf-8")
    done = run(tmp_path, *args, "hello")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert says in done.stderr


def test_run_reads_a_malformed_model_from_the_environment_as_a_usage_error(tmp_path: Path) -> None:
    done = run(tmp_path, "hello", ACP_SERVER_MODEL="mistral:large")
    assert done.returncode == 2
    assert "ACP_SERVER_MODEL" in done.stderr and "PROVIDER:MODEL" in done.stderr


def test_run_help_documents_the_exit_codes() -> None:
    done = subprocess.run(
        [console_script(), "run", "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    section = done.stdout.split("exit status:\n", 1)[1]
    codes = [
        line.split()[0]
        for line in section.splitlines()
        if line.startswith("  ") and line.split()[0].isdigit()
    ]
    assert codes == ["0", "1", "2", "3", "130"]


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
