"""`acp-server run "prompt"`: a headless ACP client that starts a real server over pipes.

It is what an editor does, minus the editor: spawn `acp-server serve`, initialize, open a
session, send one prompt and print the streamed reply. The reply goes to stdout; thoughts, tool
activity and the stop reason go to stderr, so `acp-server run … > answer.md` keeps only the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from acp_server.errors import RemoteError
from acp_server.jsonrpc import Connection, Params


class _Printer:
    """Renders session/update notifications for a terminal."""

    def __init__(self) -> None:
        self.in_thought = False
        self.wrote_text = False

    def update(self, params: Params) -> None:
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        content = update.get("content") or {}
        if kind == "agent_message_chunk" and content.get("type") == "text":
            self._end_thought()
            sys.stdout.write(content["text"])
            sys.stdout.flush()
            self.wrote_text = True
        elif kind == "agent_thought_chunk" and content.get("type") == "text":
            if not self.in_thought:
                sys.stderr.write("\n[thinking] ")
                self.in_thought = True
            sys.stderr.write(content["text"])
            sys.stderr.flush()
        elif kind == "tool_call":
            self._end_thought()
            print(f"\n[tool] {update.get('title')}", file=sys.stderr)
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            print(f"[tool {update['status']}] {update.get('toolCallId')}", file=sys.stderr)
        elif kind == "plan":
            self._end_thought()
            for entry in update.get("entries", []):
                print(f"[plan] {entry.get('status')}: {entry.get('content')}", file=sys.stderr)

    def _end_thought(self) -> None:
        if self.in_thought:
            sys.stderr.write("\n")
            self.in_thought = False


def run_headless(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130


def _server_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "acp_server", "serve"]
    for flag, attr in (
        ("--script", "script"),
        ("--max-turn-requests", "max_turn_requests"),
        ("--model", "model"),
    ):
        value = getattr(args, attr, None)
        if value is not None:
            argv += [flag, str(Path(value).resolve()) if attr == "script" else str(value)]
    for flag, attr in (("--log-level", "log_level"), ("--log-file", "log_file")):
        if getattr(args, attr, None) is not None:
            argv += [flag, str(getattr(args, attr))]
    return argv


async def _run(args: argparse.Namespace) -> int:
    proc = await asyncio.create_subprocess_exec(
        *_server_argv(args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 20,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    printer = _Printer()
    conn = Connection(
        lambda: stdout.read(1 << 20),
        proc.stdin,
        requests={"session/request_permission": _refuse_permission},
        notifications={"session/update": printer.update},
    )
    reader = asyncio.create_task(conn.serve())
    try:
        stop = await _converse(conn, args)
    except RemoteError as exc:
        print(f"\nacp-server: the server answered with an error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
        reader.cancel()
    if printer.wrote_text:
        sys.stdout.write("\n")
    if stop != "end_turn":
        print(f"[stopped: {stop}]", file=sys.stderr)
    return 0 if stop == "end_turn" else (130 if stop == "cancelled" else 1)


async def _converse(conn: Connection, args: argparse.Namespace) -> str:
    await conn.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
            "clientInfo": {"name": "acp-server-run", "version": "1"},
        },
    )
    cwd = str((args.cwd or Path.cwd()).resolve())
    session = await conn.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = session["sessionId"]
    if getattr(args, "mode", None):
        await conn.request("session/set_mode", {"sessionId": session_id, "modeId": args.mode})
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(
        signal.SIGINT, lambda: conn.notify("session/cancel", {"sessionId": session_id})
    )
    result: dict[str, Any] = await conn.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": args.prompt}]},
    )
    return str(result.get("stopReason"))


async def _refuse_permission(params: Params) -> dict[str, Any]:
    title = (params.get("toolCall") or {}).get("title", "a tool call")
    print(
        f"\n[permission] refused {title}: `acp-server run` cannot ask you interactively.",
        file=sys.stderr,
    )
    reject = next(
        (o for o in params.get("options", []) if o.get("kind") == "reject_once"),
        None,
    )
    if reject is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": reject["optionId"]}}
