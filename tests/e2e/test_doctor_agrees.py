"""`acp-server doctor` says what `run` and a session would do, with the same command line: the
embedded model named as docs/models.md spells it (`--model local:smollm2`, before the command),
the model `--live` asks when none is named, the global `--sandbox`, and where a model was named
(`--model` or ACP_SERVER_MODEL). The console script, run as a person runs it.

The tests that start the embedded model need the real model tier (tests/support/llama_server.py):
skipped without it, failed when ACP_REQUIRE_REAL_MODEL=1 (CI).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.e2e.test_doctor import CLEARED, advice, line, openai_env
from tests.support.llama_server import require_model_tier
from tests.support.mock_llm import MockLLM
from tests.support.raw import console_script


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A machine with nothing set up (no keys, no file, no discovery); the embedded model
    allowed, as on a fresh install with the `local` extra."""
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean.pop("ACP_SERVER_EMBEDDED", None)
    clean.pop("ACP_SERVER_SANDBOX", None)
    return {
        **clean,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "ACP_SERVER_DATA_DIR": str(tmp_path / "data"),
        "ACP_SERVER_DISCOVER": "0",
        "PYTHONIOENCODING": "utf-8",
    }


async def doctor(env: dict[str, str], *args: str, limit: float = 60) -> tuple[int, list[str], str]:
    """`acp-server ARGS` (the word `doctor` among them): exit code, stdout lines, stderr."""
    proc = await asyncio.create_subprocess_exec(
        console_script(),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), limit)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode("utf-8").splitlines(), err.decode("utf-8")


async def test_the_embedded_model_named_as_the_docs_spell_it_is_checked_as_run_starts_it(
    env: dict[str, str],
) -> None:
    require_model_tier()
    code, lines, _ = await doctor(env, "--model", "local:smollm2", "doctor")
    assert code == 0, "\n".join(lines)
    assert not [text for text in lines if "cannot be reached" in text], lines
    found = line(lines, "✔ Model local:smollm2: SmolLM2-135M-Instruct")
    assert "runs on this machine" in found and "context window 8,192 tokens" in found
    assert line(lines, "✔ Model: new sessions start with local:smollm2 (--model)")


async def test_a_local_model_file_that_is_not_there_is_said_so_not_an_unreachable_server(
    env: dict[str, str], tmp_path: Path
) -> None:
    gone = tmp_path / "no-such.gguf"
    code, lines, _ = await doctor(env, "--model", f"local:{gone}", "doctor")
    assert code == 1
    assert not [text for text in lines if "cannot be reached" in text], lines
    assert line(lines, f"✘ Model local:{gone}: cannot run on this machine")
    said = advice(lines, f"✘ Model local:{gone}")
    assert "does not exist" in said or "Install it with" in said


async def test_with_nothing_named_the_embedded_model_is_shown_with_its_window(
    env: dict[str, str],
) -> None:
    require_model_tier()
    code, lines, _ = await doctor(env, "doctor")
    found = line(lines, "✔ Model: none is named")
    assert "embedded SmolLM2-135M (local:smollm2, context window 8,192 tokens)" in found
    assert code == 0, lines


async def test_live_with_nothing_named_asks_the_embedded_model_new_sessions_use(
    env: dict[str, str],
) -> None:
    require_model_tier()
    _, lines, _ = await doctor(env, "doctor", "--live", limit=240)
    assert not [text for text in lines if "no model to ask" in text], lines
    live = [text for text in lines if "Live test of local:smollm2" in text]
    assert live, lines
    # It answers (in words: it is for trying, as documented), unless a machine too busy to
    # answer within doctor's own time limit cut it short: that is said as such.
    assert not live[0].startswith("✘") or "the request failed" in live[0], lines


async def test_the_global_sandbox_flag_is_the_level_doctor_reports(env: dict[str, str]) -> None:
    for args in (["--sandbox", "read-only", "doctor"], ["doctor", "--sandbox", "read-only"]):
        _, lines, _ = await doctor({**env, "ACP_SERVER_SANDBOX_WITH": "landlock"}, *args)
        found = line(lines, "✔ Sandbox read-only, kept by landlock")
        assert found.endswith("(from --sandbox)"), found
    both = {**env, "ACP_SERVER_SANDBOX": "workspace-net", "ACP_SERVER_SANDBOX_WITH": "landlock"}
    _, lines, _ = await doctor(both, "--sandbox", "off", "doctor")  # the flag wins, as in serve
    assert line(lines, "✔ Sandbox off").endswith("(from --sandbox)")


async def test_a_model_is_labelled_with_where_it_was_named(
    env: dict[str, str], mock_llm: MockLLM
) -> None:
    named = openai_env({**env, "ACP_SERVER_EMBEDDED": "0"}, mock_llm)
    _, lines, _ = await doctor(named, "doctor")
    assert line(lines, "✔ Model: new sessions start with openai:mock-model (ACP_SERVER_MODEL)")
    del named["ACP_SERVER_MODEL"]
    _, lines, _ = await doctor(named, "--model", "openai:mock-model", "doctor")
    assert line(lines, "✔ Model: new sessions start with openai:mock-model (--model)")


async def test_the_embedded_model_switched_off_is_said_to_be_off_not_missing(
    env: dict[str, str],
) -> None:
    code, lines, _ = await doctor({**env, "ACP_SERVER_EMBEDDED": "0"}, "doctor")
    assert code == 1
    said = advice(lines, "✘ Model: none is named")
    assert "switched off here by ACP_SERVER_EMBEDDED=0" in said, said
    assert "pip install" not in said and "not installed" not in said, said
