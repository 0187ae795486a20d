"""`acp-server run --model` accepts what `serve` accepts: a provider of the configuration file
(`--config` or ACP_SERVER_CONFIG) as well as the built-in ones; a model neither knows is a
usage error (exit 2) that says how to write one, before any server starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.test_run_cli import clean_env, run
from tests.support.mock_llm import MockLLM
from tests.support.raw import console_script


def lab_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[providers.lab]\ndialect = "openai"\nbase_url = "{url}/v1"\n', "utf-8")
    return path


async def run_async(tmp_path: Path, *args: str, **env: str) -> tuple[int | None, str, str]:
    proc = await asyncio.create_subprocess_exec(
        console_script(),
        "run",
        *args,
        cwd=tmp_path,
        env=clean_env(tmp_path, ACP_SERVER_DISCOVER="0", **env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def test_run_answers_with_a_provider_of_the_configuration_file(
    tmp_path: Path, mock_llm: MockLLM
) -> None:
    mock_llm.queue({"text": "Hello from the lab."})
    config = lab_config(tmp_path, mock_llm.url)
    code, out, err = await run_async(
        tmp_path, "--config", str(config), "--model", "lab:qwen3-32b", "hello"
    )
    assert code == 0, err
    assert out == "Hello from the lab.\n"
    assert mock_llm.chat_requests[0].json["model"] == "qwen3-32b"


async def test_run_reads_the_configuration_file_named_in_the_environment(
    tmp_path: Path, mock_llm: MockLLM
) -> None:
    mock_llm.queue({"text": "Configured."})
    config = lab_config(tmp_path, mock_llm.url)
    code, out, err = await run_async(
        tmp_path, "--model", "lab:m", "hi", ACP_SERVER_CONFIG=str(config)
    )
    assert code == 0, err
    assert out == "Configured.\n"


def test_run_refuses_a_model_of_a_provider_neither_knows_with_exit_2(tmp_path: Path) -> None:
    config = lab_config(tmp_path, "http://127.0.0.1:9")
    done = run(tmp_path, "--config", str(config), "--model", "elsewhere:m", "hello")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "'elsewhere:m'" in done.stderr and "lab" in done.stderr and "openai" in done.stderr


def test_run_refuses_a_broken_configuration_file_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[models]]\nprovider = "openai"\nwindow = \n', encoding="utf-8")
    done = run(tmp_path, "--config", str(path), "--model", "openai:m", "hello")
    assert done.returncode == 2, done.stderr
    assert str(path) in done.stderr and "line 3" in done.stderr
