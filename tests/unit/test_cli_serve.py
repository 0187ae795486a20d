"""`cli.serve.lean_http_imports`: httpx's command-line client and the absent async-library
probes stay out of the server, and the HTTP stack still makes real requests without them
(checked in a fresh interpreter: the test process has imported httpx already)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import asyncio, json, sys
from acp_server.cli.serve import lean_http_imports

lean_http_imports()
import httpx

async def answer(reader, writer):
    await reader.readuntil(b"\\r\\n\\r\\n")
    writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\nok")
    await writer.drain()
    writer.close()

async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/")
    server.close()
    print(json.dumps({
        "status": response.status_code,
        "text": response.text,
        "loaded": [m for m in ("click", "pygments", "rich") if m in sys.modules],
        "sniffio": repr(sys.modules.get("sniffio", "absent")),
    }))

asyncio.run(main())
"""


def test_the_http_stack_works_without_its_cli_and_probes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(done.stdout)
    assert result["status"] == 200 and result["text"] == "ok"
    assert result["loaded"] == []
    # Blocked only where it is not installed; where it is, it was imported as usual.
    assert result["sniffio"] == "None" or "module 'sniffio'" in result["sniffio"]
