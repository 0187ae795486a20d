"""session/new is answered before the session machinery is loaded (issue 14): the store,
the transcript and the session itself (~25 ms of imports) are built right after the answer,
and every lookup of the new id finds the session whatever the order of events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Runs in a fresh interpreter: the test process has imported everything already.
PROBE = """
import argparse, asyncio, json, sys
from acp_server.cli.serve import model_source
from acp_server.settings import Settings
from acp_server.protocol.handlers import AcpAgent

MACHINERY = (
    "acp_server.session.session",
    "acp_server.store.database",
    "acp_server.store.transcript",
    "acp_server.messages",
    "acp_server.permissions",
    "tomllib",
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
from acp_server.settings import Settings
from acp_server.wire.jsonrpc import Connection
from acp_server.protocol.handlers import AcpAgent

class Sink:
    def __init__(self):
        self.pending, self.seen = [], []
    def write(self, data):
        if not self.pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self.pending.append(data)
    def flush(self):
        built = "acp_server.session.session" in sys.modules
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


async def test_local_models_are_looked_for_after_the_warm_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside the warm-up, the look for local models (an HTTP client, a request per local
    server) delayed a first prompt sent at once by ~20 ms (benchmarks/first_prompt.py)."""
    import argparse
    import asyncio

    from acp_server.cli.serve import model_source
    from acp_server.protocol.handlers import AcpAgent
    from acp_server.settings import Settings

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ACP_SERVER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ACP_SERVER_DISCOVER", raising=False)

    def running(name: str) -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == name]  # type: ignore[union-attr]

    args = argparse.Namespace(model=["openai:mock-model"], config=None, script=None)
    agent = AcpAgent(lambda: None, Settings(), lambda: model_source(args))  # type: ignore[arg-type,return-value]
    await agent.initialize({"protocolVersion": 1})
    await agent.new_session({"cwd": str(tmp_path), "mcpServers": []})
    for _ in range(3):  # the answer leaves, the session is built, the warm-up starts
        await asyncio.sleep(0)
    warm_up = running("prepare_first_turn")
    assert len(warm_up) == 1 and running("ModelSource.discover") == []
    await warm_up[0]
    await asyncio.sleep(0)
    discovery = running("ModelSource.discover")
    assert len(discovery) == 1
    discovery[0].cancel()
    agent.close()
