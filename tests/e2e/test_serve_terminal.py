"""Bare `acp-server` typed at a terminal: one line on stderr says what it is, then it serves.

Editors start it with pipes, where that line must never appear (some show any stderr line as
an error), so the hint depends on stdin being a terminal: a pty here.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path

from tests.support.raw import console_script

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def read_line(fd: int, timeout: float = 30) -> bytes:  # a busy machine starts a server slowly
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing more within {timeout} s after {data!r}"
        chunk = os.read(fd, 4096)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


def test_on_a_terminal_it_says_what_it_is_and_keeps_serving(tmp_path: Path) -> None:
    controller, terminal = os.openpty()
    proc = subprocess.Popen(
        [console_script()],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    os.close(terminal)
    try:
        assert proc.stderr is not None and proc.stdout is not None
        hint = read_line(proc.stderr.fileno()).decode()
        assert "ACP" in hint and "stdin" in hint and "stdout" in hint
        assert "--help" in hint and "acp-server run" in hint
        os.write(controller, json.dumps(INITIALIZE).encode() + b"\n")
        answer = json.loads(read_line(proc.stdout.fileno()))
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
    finally:
        os.close(controller)  # the terminal hangs up: the server sees the end of its input
        try:
            proc.wait(10)
        finally:
            proc.kill()
            proc.wait()
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()


def test_on_pipes_it_says_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [console_script()],
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["id"] == 1
    assert done.stderr == ""
