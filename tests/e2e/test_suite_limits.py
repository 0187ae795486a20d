"""The test suite itself can neither hang nor depend on how it was started or how busy the
machine is: every test has a time limit, a test past it fails with a traceback, the tests that
press Ctrl-C pass in a run started in the background (`nohup pytest … &`, where every child
ignores SIGINT), and a wait on a real model lasts while the work goes on, however slowly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.progress import run_while_working, while_working

ROOT = Path(__file__).resolve().parents[2]
CTRL_C_TESTS = [
    "tests/e2e/test_setup_terminal.py::test_ctrl_c_ends_setup_with_a_sentence_and_no_traceback",
    "tests/e2e/test_run_terminal.py::test_at_a_terminal_ctrl_c_while_asked_cancels_the_turn",
]


def ignore_sigint() -> None:
    """In the child: what `nohup … &` does to a background job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def pytest_run(args: list[str], cwd: Path, timeout: float) -> tuple[int, str, float]:
    """Run pytest in a child with SIGINT ignored: its exit status, output and wall time. It and
    everything it started are killed past `timeout`, and the test fails saying so."""
    started = time.monotonic()
    with subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group, so a hung grandchild is killed too
        preexec_fn=ignore_sigint,
        # Not the outer run's options: a --basetemp there is a parent of this child's cwd.
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
    ) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
            pytest.fail(
                f"pytest {' '.join(args)} still ran after {timeout:.0f} s (hung); its output:\n"
                + out.decode(errors="replace")[-3000:]
            )
    return proc.returncode, out.decode(errors="replace"), time.monotonic() - started


def test_the_ctrl_c_tests_pass_in_a_run_that_ignores_sigint() -> None:
    """Regression: under `nohup … &` setup ignored the test's SIGINT, and the test read its
    stderr with no time limit, so the suite hung for ever."""
    code, out, _ = pytest_run(CTRL_C_TESTS, ROOT, timeout=240)
    assert code == 0, out[-3000:]
    assert "2 passed" in out, out[-3000:]


def test_every_test_has_a_time_limit(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not loaded"
    assert float(request.config.getini("timeout")) > 0, "pyproject.toml sets no `timeout`"


def test_a_hung_test_fails_at_its_limit_with_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(
        "import time\n\n\ndef test_waits_for_ever():\n    time.sleep(3600)\n", encoding="utf-8"
    )
    # The project's own settings, with a short limit (the default is minutes).
    args = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-o", "timeout=3"]
    code, out, took = pytest_run([*args, str(tmp_path / "test_hung.py")], tmp_path, timeout=120)
    assert code == 1, out[-3000:]
    assert "Timeout" in out and "time.sleep(3600)" in out, out[-3000:]  # with its traceback
    assert "1 failed" in out, out[-3000:]
    assert took < 100


def test_a_slow_command_is_waited_for_while_it_works() -> None:
    """A command that keeps a core busy for longer than the quiet time is not taken as hung."""
    burn = (
        "import time\nend = time.monotonic() + 8\nwhile time.monotonic() < end: pass\nprint('ok')"
    )
    done = run_while_working([sys.executable, "-c", burn], what="a busy command", quiet=4)
    assert done.returncode == 0 and done.stdout == "ok\n"


def test_a_command_that_does_nothing_fails_after_the_quiet_time() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="did nothing for 3 s"):
        run_while_working(["sleep", "600"], what="sleep", quiet=3)
    assert time.monotonic() - started < 60


async def test_an_awaited_answer_fails_once_its_processes_do_nothing() -> None:
    proc = await asyncio.create_subprocess_exec("sleep", "600")
    try:
        with pytest.raises(pytest.fail.Exception, match="stuck rather than slow"):
            await while_working(proc.wait(), [proc.pid], what="sleep", quiet=3)
    finally:
        proc.kill()
        await proc.wait()
