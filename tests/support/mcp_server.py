"""An MCP server for the tests, written with the `mcp` package (server side).

Run as a script (`python tests/support/mcp_server.py BEHAVIOUR [--http PORT | --sse PORT]
[--require NAME=VALUE]`): stdio by default, or streamable HTTP / SSE on 127.0.0.1; with
`--require`, every HTTP request without that header and value is answered 401 (a server that
wants an `Authorization` bearer, say). BEHAVIOUR chooses how it misbehaves:

- `normal`: serves its tools;
- `exit`: exits at once (before answering `initialize`);
- `hang`: never answers (sleeps at start, before serving);
- `crash2`: its `echo` tool works once, and the second call kills the process;
- `elicit`: serves its tools and two that ask the user (below);
- `noisy`: writes a line that is not JSON-RPC to its stdout, and to stderr at start and at each
  call (none of it may reach the agent's stdout).

Tools: `echo` (read-only), `add` (structured result), `fail` (an error result), `image`
(an image result), `remove` (destructive), `slow` (sleeps, for cancels); with the behaviour
`elicit` also `pick_colour` (asks the user with a form: MCP elicitation) and `sign_in` (sends
the user to a page: URL elicitation, then says it is complete).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def build(behaviour: str) -> MCPServer:
    server: MCPServer = MCPServer("test-mcp")
    calls = {"echo": 0}

    @server.tool(
        description="Repeat the text back.", annotations=ToolAnnotations(read_only_hint=True)
    )
    def echo(text: str) -> str:
        calls["echo"] += 1
        if behaviour == "noisy":
            print(f"noisy stderr: echo {text}", file=sys.stderr, flush=True)
        if behaviour == "crash2" and calls["echo"] >= 2:
            os._exit(3)
        return f"echo: {text}"

    @server.tool(description="Add two numbers.")
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ValueError(f"failed on purpose: {reason}")

    @server.tool(description="A one-pixel image.")
    def image() -> Image:
        return Image(data=PIXEL, format="png")

    @server.tool(
        description="Pretend to remove a thing.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
    )
    def remove(thing: str) -> str:
        return f"removed {thing}"

    @server.tool(description="Sleep for a while.")
    def slow(seconds: float) -> str:
        time.sleep(seconds)
        return "slept"

    if behaviour == "elicit":
        asking(server)
    return server


SIGN_IN = "https://login.example.test/start"


def asking(server: MCPServer) -> None:
    """The tools that ask the user (behaviour `elicit`)."""

    @server.tool(
        description="Ask the user for a colour.", annotations=ToolAnnotations(read_only_hint=True)
    )
    async def pick_colour(ctx: Context) -> str:
        answer = await ctx.elicit("Which colour should the theme use?", Colour)
        if answer.action == "accept":
            return f"colour: {answer.data.colour}"
        return f"no colour: the user chose {answer.action}"

    @server.tool(description="Sign the user in.", annotations=ToolAnnotations(read_only_hint=True))
    async def sign_in(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in to go on.", SIGN_IN, "login-1")
        if answer.action == "accept":
            await ctx.request_context.session.send_elicit_complete("login-1")
        return f"sign-in: {answer.action}"


class Colour(BaseModel):
    colour: str = Field(description="A colour name")


def main(argv: list[str]) -> None:
    behaviour = argv[1] if len(argv) > 1 else "normal"
    if behaviour == "exit":
        print("test-mcp: exiting at start on purpose", file=sys.stderr, flush=True)
        sys.exit(1)
    if behaviour == "hang":
        time.sleep(3600)
    if behaviour == "noisy":  # neither line may reach the agent's stdout
        print("noisy stderr: starting", file=sys.stderr, flush=True)
        print("noisy stdout: not JSON-RPC", flush=True)
    server = build(behaviour)
    required = argv[argv.index("--require") + 1] if "--require" in argv else None
    if "--http" in argv:
        port = int(argv[argv.index("--http") + 1])
        _serve_app(server.streamable_http_app(), port, required)
    elif "--sse" in argv:
        port = int(argv[argv.index("--sse") + 1])
        _serve_app(server.sse_app(), port, required)
    else:
        server.run("stdio")


ASGI = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def requiring(app: ASGI, required: str) -> ASGI:
    """`app` behind a check of one header (`NAME=VALUE`): 401 without it, or with another value."""
    name, _, value = required.partition("=")
    wanted = (name.strip().lower().encode(), value.encode())

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {(bytes(k).lower(), bytes(v)) for k, v in scope.get("headers", [])}
        if scope["type"] == "http" and wanted not in headers:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def _serve_app(app: Any, port: int, required: str | None) -> None:
    import uvicorn

    served = requiring(app, required) if required else app
    uvicorn.run(served, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv)
