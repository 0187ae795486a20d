"""`acp-server run` answers the model's questions (ACP form elicitation): at a terminal each
one is asked on the pseudo-terminal, a choice with one key; with stdin piped the question is
declined and stderr says why. What the model heard is read from the mock LLM's next request."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.e2e.test_run_cli import clean_env, run
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation
from tests.support.raw import console_script

MARK = "[question]"
QUESTION = {
    "tool_calls": [
        {
            "name": "ask_user",
            "arguments": {"question": "Which database?", "choices": ["Postgres", "SQLite"]},
        }
    ]
}


def model_env(mock: MockLLM) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}


def heard(mock: MockLLM) -> str:
    turns = conversation(mock.chat_requests[-1].json)
    return [t for t in turns if t.role == "tool"][-1].text


def on_terminal(tmp_path: Path, env: dict[str, str], keys: bytes) -> tuple[int, str]:
    """Run at a pseudo-terminal, typing `keys` once the question shows; (status, what showed)."""
    leader, follower = pty.openpty()
    argv = [console_script(), "run", "--model", "openai:mock-model", "pick one"]
    proc = subprocess.Popen(
        argv,
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=tmp_path,
        env=clean_env(tmp_path, **env),
    )
    os.close(follower)
    shown, typed = "", False
    deadline = time.monotonic() + 60
    with proc:
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([leader], [], [], 1)
                if not ready:
                    continue
                try:
                    data = os.read(leader, 4096)
                except OSError:
                    break
                if not data:
                    break
                shown += data.decode(errors="replace")
                if not typed and "Press 1-2" in shown:
                    os.write(leader, keys)
                    typed = True
        finally:
            os.close(leader)
            if proc.poll() is None:
                proc.kill()
        assert proc.stdout is not None
        proc.stdout.read()
    return proc.returncode, shown


async def test_at_a_terminal_a_choice_is_one_key(mock_llm: MockLLM, tmp_path: Path) -> None:
    mock_llm.queue(QUESTION, {"text": "Chosen."})
    code, shown = await asyncio.to_thread(on_terminal, tmp_path, model_env(mock_llm), b"2")
    assert code == 0, shown
    assert f"{MARK} Which database?" in shown and "[2] SQLite" in shown
    assert heard(mock_llm) == "The user answered: SQLite"


async def test_piped_the_question_is_declined_on_stderr(mock_llm: MockLLM, tmp_path: Path) -> None:
    mock_llm.queue(QUESTION, {"text": "Fine."})
    args: Any = ("--model", "openai:mock-model", "pick one")
    done = await asyncio.to_thread(run, tmp_path, *args, **model_env(mock_llm))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Fine.\n"
    assert f"{MARK} declined: stdin is not a terminal" in done.stderr
    assert heard(mock_llm).startswith("The user chose not to answer (they declined it)")
