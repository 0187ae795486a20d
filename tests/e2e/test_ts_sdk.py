"""End-to-end: the official ACP TypeScript SDK client drives the real console script.

`tests/ts/client_flow.mjs` (run with node) speaks to `acp-server --script ...` through the
`conformance` wire tap: initialize, session/new, a plain prompt, a slow prompt cancelled
after its first chunk, and a prompt after the cancel. It prints one JSON summary line that
this test checks; the tap validates every frame against the official schema at teardown.
Needs node and `npm ci --prefix tests`; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent.parent
FLOW_SCRIPT = TESTS_DIR / "ts" / "client_flow.mjs"
SDK_PACKAGE = TESTS_DIR / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"

FIRST_TEXT = "Hello from the script."
# Long and slow (about 6 s in total) so the cancel lands in the middle of the reply.
SLOW_TEXT = " ".join(f"slow{i}" for i in range(60)) + "."
THIRD_TEXT = "Back again after the cancel."
SCRIPT = [
    {"text": FIRST_TEXT},
    {"text": SLOW_TEXT, "delay_ms": 100},
    {"text": THIRD_TEXT},
]
# Generous: the reply takes seconds, a cancel that works takes one delay step or so.
MAX_CANCEL_LATENCY_MS = 3000


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the TypeScript SDK e2e test needs Node.js")
    if not SDK_PACKAGE.is_file():
        pytest.skip("@agentclientprotocol/sdk is not installed; run `npm ci --prefix tests`")
    return node


def _run_flow(node: str, server_argv: list[str], cwd: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "ACP_SERVER_ARGV": json.dumps(server_argv),
        "ACP_TEST_CWD": str(cwd),
        "ACP_FLOW_TIMEOUT_MS": "45000",
    }
    proc = subprocess.run(
        [node, str(FLOW_SCRIPT)],
        env=env,
        cwd=TESTS_DIR.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    report = f"exit code {proc.returncode}\n{output}"
    assert proc.returncode == 0, f"client_flow.mjs failed\n{report}"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected exactly one summary line\n{report}"
    summary = json.loads(lines[0])
    assert isinstance(summary, dict), report
    return summary


def test_typescript_sdk_client_flow(tmp_path: Path, conformance: Any) -> None:
    node = _node()
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    summary = _run_flow(node, conformance.server_argv("--script", str(script_path)), workspace)

    assert summary["problems"] == []
    assert summary["protocolVersion"] == 1
    assert summary["exitCode"] == 0, "the server should exit cleanly when its stdin closes"
    assert summary["permissionRequests"] == 0

    assert summary["firstStop"] == "end_turn"
    assert summary["firstText"] == FIRST_TEXT
    assert summary["firstChunks"] >= 2, "text should stream in several chunks"
    assert len(summary["firstMessageIds"]) <= 1, "chunks of one message share one messageId"

    assert summary["cancelSent"] is True
    assert summary["cancelStop"] == "cancelled"
    assert summary["chunksBeforeCancel"] >= 1
    assert SLOW_TEXT.startswith(summary["cancelText"])
    assert summary["cancelText"] != SLOW_TEXT, "the cancel should cut the slow reply short"
    assert summary["cancelLatencyMs"] < MAX_CANCEL_LATENCY_MS

    assert summary["thirdStop"] == "end_turn"
    assert summary["thirdText"] == THIRD_TEXT
    assert len(summary["thirdMessageIds"]) <= 1
    if summary["firstMessageIds"] and summary["thirdMessageIds"]:
        assert summary["firstMessageIds"] != summary["thirdMessageIds"]
