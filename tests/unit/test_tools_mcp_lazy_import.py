"""`import mcp` costs most of a second: `initialize`, and a session without MCP servers, never
pay it (checked in a fresh interpreter, where sys.modules shows what was imported)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

MCP_SERVER = Path(__file__).parent.parent / "support" / "mcp_server.py"

CODE = """
import asyncio, json, sys
from acp_server.backends.scripted import ScriptedBackend
from acp_server.protocol.handlers import AcpAgent

async def main(cwd, servers):
    agent = AcpAgent(lambda: ScriptedBackend.from_rounds([{"text": "hi"}]))
    handlers = agent.request_handlers()
    await handlers["initialize"]({"protocolVersion": 1})
    after_initialize = "mcp" in sys.modules
    new = await handlers["session/new"]({"cwd": cwd, "mcpServers": servers})
    prompt = [{"type": "text", "text": "hello"}]
    await handlers["session/prompt"]({"sessionId": new["sessionId"], "prompt": prompt})
    print(json.dumps([after_initialize, "mcp" in sys.modules]))
    agent.sessions.shutdown()

asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
"""


def loaded(cwd: Path, servers: list[dict[str, Any]]) -> list[bool]:
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(cwd), json.dumps(servers)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: list[bool] = json.loads(done.stdout)
    return result


def test_initialize_and_a_session_without_servers_never_import_mcp(tmp_path: Path) -> None:
    assert loaded(tmp_path, []) == [False, False]


def test_a_session_with_a_server_imports_it(tmp_path: Path) -> None:
    # The check above can see the import: here it happens (off the event loop).
    server = {"name": "s", "command": sys.executable, "args": [str(MCP_SERVER)], "env": []}
    assert loaded(tmp_path, [server]) == [False, True]
