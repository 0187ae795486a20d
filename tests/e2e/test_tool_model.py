"""The tool-model tier (ACP_TOOL_MODEL=1, set in CI): `acp-server run` on Qwen2.5-Coder-1.5B, a
local model that can call tools, assembled from pinned packages and checked
(tests/support/tool_model.py). Each task is judged by its effect (a file changed, a command
ran), never by the model's wording; the limits are generous, for a loaded machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.progress import run_while_working
from tests.support.raw import console_script
from tests.support.tool_model import require_tool_model

TURN_TIMEOUT = 1800  # seconds: the backstop for one task (a first request of ~2,000 tokens)


def run(gguf: Path, cwd: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ACP_SERVER_EMBEDDED": "0",
        "ACP_SERVER_LOCAL_CONTEXT": "4096",
        "ACP_SERVER_LOCAL_THREADS": "2",
        "ACP_SERVER_DATA_DIR": str(cwd.parent / "data"),
        "ACP_SERVER_DISCOVER": "0",
    }
    argv = [console_script(), "run", "--model", f"local:{gguf}", "--yes", "--cwd", str(cwd)]
    # Waited for while the agent and its model server work: on a busy machine a turn of a
    # 1.5B model takes many minutes, and only a stall is a failure.
    return run_while_working(
        [*argv, "--max-turn-requests", "6", prompt], what="acp-server run", env=env
    )


@pytest.mark.timeout(2 * TURN_TIMEOUT)
def test_the_model_edits_a_line_with_its_tools(tmp_path: Path) -> None:
    gguf = require_tool_model()
    work = tmp_path / "work"
    work.mkdir()
    (work / "greet.py").write_text('print("hi")\n', encoding="utf-8")
    done = run(gguf, work, 'In greet.py, change "hi" to "hello" using the edit_file tool.')
    assert "[tool completed] Edit greet.py" in done.stderr, done.stderr  # edit_file's title
    assert (work / "greet.py").read_text("utf-8") == 'print("hello")\n', done.stderr


@pytest.mark.timeout(2 * TURN_TIMEOUT)
def test_the_model_runs_a_command(tmp_path: Path) -> None:
    gguf = require_tool_model()
    work = tmp_path / "work"
    work.mkdir()
    (work / "mark.py").write_text("open('marker.txt', 'w').write('ran')\n", encoding="utf-8")
    done = run(gguf, work, "Run the command `python3 mark.py` with the run_command tool.")
    assert "[tool completed]" in done.stderr and "mark.py" in done.stderr, done.stderr
    assert (work / "marker.txt").read_text("utf-8") == "ran", done.stderr
