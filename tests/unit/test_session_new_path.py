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


# The answer leaves before the session is built: over a real Connection, with a sink that
# flushes as stdio's pipe sink does (in a callback queued at the first write of a pass).
WIRE_PROBE = """
import argparse, asyncio, json, sys
from acp_server.cli.serve import model_source
from acp_server.config import Settings
from acp_server.jsonrpc import Connection
from acp_server.protocol import AcpAgent

class Sink:
    def __init__(self):
        self.pending, self.seen = [], []
    def write(self, data):
        if not self.pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self.pending.append(data)
    def flush(self):
        built = "acp_server.session" in sys.modules
        self.seen += [(json.loads(d), built) for d in self.pending]
        self.pending.clear()
    async def drain(self):
        self.flush()

LINES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
    {"jsonrpc": "2.0", "id": 2, "method": "session/new",
     "params": {"cwd": sys.argv[1], "mcpServers": []}},
]

async def main() -> None:
    chunks = [json.dumps(line).encode() + b"\\n" for line in LINES]
    async def read() -> bytes:
        # As an editor: each request once the answer to the one before has left.
        while len(sink.seen) < 2 - len(chunks):
            await asyncio.sleep(0.01)
        if chunks:
            return chunks.pop(0)
        await asyncio.sleep(0.3)
        return b""
    args = argparse.Namespace(model=["openai:mock-model"], config=None, script=None)
    agent = AcpAgent(lambda: None, Settings(), lambda: model_source(args))
    sink = Sink()
    conn = Connection(read, sink, requests=agent.request_handlers(),
                      notifications=agent.notification_handlers())
    agent.conn = conn
    await conn.serve()
    agent.close()
    print(json.dumps([[frame.get("id"), frame.get("method"), built] for frame, built in sink.seen]))

asyncio.run(main())
"""


def test_the_session_new_answer_leaves_before_the_session_is_built(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "ACP_SERVER_DISCOVER": "0",
        "ACP_SERVER_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-c", WIRE_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    frames = json.loads(done.stdout)
    assert frames[:2] == [[1, None, False], [2, None, False]]  # answered, nothing built yet
    assert [2, None, False] in frames and [None, "session/update", True] in frames[2:]
