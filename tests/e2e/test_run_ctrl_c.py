"""Ctrl-C in `acp-server run` as a person types it: the terminal's interrupt character written to
a pseudo-terminal that is `run`'s controlling terminal, so the kernel signals the terminal's
whole foreground process group, not only `run` (which is what a signal sent to `run`'s pid
cannot show). The turn must end cancelled (exit 130, "[stopped: cancelled]"), both while the
reply streams and while a permission question waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.test_run_cli import clean_env, write_script
from tests.e2e.test_run_terminal import QUESTION, writes
from tests.support.raw import console_script

LIMIT = 60  # seconds for the whole run, however busy the machine


def _own_terminal() -> None:
    """In the child: a session of its own whose controlling terminal is the pty on stdin."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _ctrl_c(leader: int) -> None:
    """Type the terminal's interrupt character (^C unless changed), as a keyboard would."""
    intr = termios.tcgetattr(leader)[6][termios.VINTR]
    os.write(leader, intr if isinstance(intr, bytes) else bytes([intr]))


def interrupted(
    tmp_path: Path, args: list[str], when: str, hang: bool = False
) -> tuple[int | None, str, str]:
    """Run `acp-server run` on a pseudo-terminal, type Ctrl-C once `when` shows there (`hang`:
    first stop its server, so the cancel goes unanswered, and type Ctrl-C again a second
    later); the exit status (None: still running at the limit, then killed), stdout and what
    was shown."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [console_script(), "run", *args],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=tmp_path,
        env=clean_env(tmp_path),
        start_new_session=True,
        preexec_fn=_own_terminal,
    )
    os.close(follower)
    assert proc.stdout is not None
    stopped: list[int] = []
    try:
        stop = (lambda: stopped.extend(_stop_children(proc.pid))) if hang else None
        seen = _type_ctrl_c_when(leader, proc.stdout.fileno(), when, stop)
        code: int | None = proc.wait(timeout=LIMIT / 2)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pid in stopped:  # a server the test stopped and run did not end: end it here
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()
    return code, seen[1].decode(errors="replace"), seen[0].decode(errors="replace")


def _type_ctrl_c_when(
    leader: int, stdout: int, when: str, stop: Callable[[], None] | None
) -> tuple[bytes, bytes]:
    """What the terminal showed and what came on stdout until `run` ended, Ctrl-C typed once
    `when` appeared in either (after `stop`, and with `stop` once more a second later)."""
    got = {leader: b"", stdout: b""}
    reading, typed, again = {leader, stdout}, False, float("inf")
    deadline = time.monotonic() + LIMIT
    while reading and time.monotonic() < deadline:
        ready, _, _ = select.select(list(reading), [], [], 0.5)
        for fd in ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # nobody has the terminal open any more: run has exited
                data = b""
            got[fd] += data
            if not data:
                reading.discard(fd)
        if not typed and when.encode() in got[leader] + got[stdout]:
            if stop is not None:
                stop()
                again = time.monotonic() + 1
            _ctrl_c(leader)
            typed = True
        if time.monotonic() > again:
            _ctrl_c(leader)
            again = float("inf")
    assert typed, f"{when!r} never showed:\n{got!r}"
    return got[leader], got[stdout]


def test_ctrl_c_typed_while_the_reply_streams_cancels_the_turn(tmp_path: Path) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    slow = [{"text": "Streaming: " + words, "chunk_chars": 6, "delay_ms": 50}]
    script = write_script(tmp_path, slow)
    code, out, shown = interrupted(tmp_path, ["--script", script, "talk"], "Streaming")
    assert code == 130, shown
    assert "[stopped: cancelled]" in shown, shown
    assert "answered with an error" not in shown and "closed the connection" not in shown
    assert out.startswith("Streaming") and "word199" not in out  # the part before Ctrl-C


def test_ctrl_c_typed_at_a_permission_question_cancels_the_turn(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt"))
    code, out, shown = interrupted(tmp_path, ["--script", script, "write a"], QUESTION)
    assert code == 130, shown
    assert "[stopped: cancelled]" in shown, shown
    assert "closed the connection" not in shown
    assert not (tmp_path / "a.txt").exists() and out == ""


def test_a_second_ctrl_c_does_not_wait_for_a_hung_server_and_leaves_none_behind(
    tmp_path: Path,
) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    script = write_script(tmp_path, [{"text": "Streaming: " + words, "delay_ms": 50}])
    code, _, shown = interrupted(tmp_path, ["--script", script, "talk"], "Streaming", hang=True)
    assert code == 130, shown
    assert "[stopped: interrupted]" in shown and "Traceback" not in shown, shown
    assert _working_in(tmp_path) == [], "a server still runs in the test's folder"


def _stop_children(pid: int) -> list[int]:
    """Stop (SIGSTOP) the processes `pid` started, as a server that hangs; their pids."""
    children = [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]
    for child in children:
        os.kill(child, signal.SIGSTOP)
    return children


def _working_in(folder: Path) -> list[int]:
    """The processes whose working directory is `folder` (a server left behind would be)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == folder:
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile, or not ours to look at
                continue
    return found
