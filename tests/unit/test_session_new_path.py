"""session/new is answered before the session machinery is loaded (issue 14): the store,
the transcript and the session itself (~25 ms of imports) are built right after the answer,
and every lookup of the new id finds the session whatever the order of events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Runs in a fresh interpreter: the test process has imported everything already.
PROBE = """
import argparse, asyncio, json, sys
from acp_server.cli.serve import model_source
from acp_server.config import Settings
from acp_server.protocol import AcpAgent

MACHINERY = (
    "acp_server.session", "acp_server.store", "acp_server.transcript", "acp_server.messages",
    "acp_server.permissions", "tomllib"
)

async def main() -> None:
    args = argparse.Namespace(model=["openai:mock-model"], config=None, script=None)
    agent = AcpAgent(lambda: None, Settings(), lambda: model_source(args))
    await agent.initialize({"protocolVersion": 1})
    answer = await agent.new_session({"cwd": sys.argv[1], "mcpServers": []})
    loaded = [name for name in MACHINERY if name in sys.modules]
    session = agent.sessions.get(answer["sessionId"])  # found, built on demand
    stored = agent.sessions.store
    await stored.flush()
    row = stored.get(session.id)
    agent.close()
    print(json.dumps({"loaded": loaded, "answer": answer, "stored": row is not None}))

asyncio.run(main())
"""


def test_session_new_is_answered_before_the_session_machinery_loads(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "ACP_SERVER_DISCOVER": "0",
        "ACP_SERVER_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["loaded"] == []
    assert found["answer"]["sessionId"].startswith("sess_")
    assert found["answer"]["modes"]["currentModeId"] == "ask"
    assert {o["id"] for o in found["answer"]["configOptions"]} >= {"mode", "model"}
    assert found["stored"]  # its row reached the store, as before
