"""One MCP server of a session, on the official `mcp` package (client side).

Imported only when a session has MCP servers (`import mcp` costs most of a second), and then
off the event loop. `McpConnection` connects (stdio, streamable HTTP or SSE) within the
server's start-up timeout, in a task of its own that holds the connection open, lists the tools
and calls them within the call timeout. A server that stopped (a crash) is started again once,
at its next use; a failure the user should hear about goes to `report` once.

Its tools are offered as `Tool`s (see `tools.py`): named `mcp__<server>__<tool>`, checked
against their input schema, gated like the built-in tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED

from acp_server import __version__
from acp_server.tools.base import ToolFailure
from acp_server.tools.mcp import stdio
from acp_server.tools.mcp.config import ServerConfig
from acp_server.tools.mcp.elicit import Asker

if TYPE_CHECKING:
    import httpx2  # the `mcp` package's HTTP client, not one of our dependencies

log = logging.getLogger(__name__)

Report = Callable[[str], None]


class McpUnavailable(Exception):
    """The server cannot be used; the message says why, for a person."""


class McpConnection:
    """One server: connected in a task of its own, its tools, its calls."""

    def __init__(self, config: ServerConfig, cwd: Path, report: Report) -> None:
        self.config = config
        self.cwd = cwd
        self.report = report
        self.tools: list[types.Tool] = []
        self.session: ClientSession | None = None
        self.restarted = False
        self.broken: str | None = None  # why it stopped working, once it did
        self._process: stdio.StdioProcess | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._http_error: tuple[int, str] | None = None  # the last HTTP error status it answered
        self.asker = Asker(config.name)  # its questions to the user (`elicit`)

    @property
    def name(self) -> str:
        return self.config.name

    async def connect(self) -> None:
        """Start the server and list its tools within its start-up timeout; McpUnavailable
        (saying why) when it cannot."""
        self._ready = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._http_error = None
        self._task = asyncio.create_task(self._hold(self._ready), name=f"mcp {self.name}")
        timeout = self.config.startup_timeout
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except TimeoutError:
            await self._give_up()
            raise McpUnavailable(
                f"it did not finish starting within {timeout:g} s{self._last_words()}"
            ) from None
        except BaseException:
            await self._give_up()
            raise

    async def _give_up(self) -> None:
        """Stop a start nobody waits for any more (timed out, or `connect` was cancelled): its
        outcome is dropped, not left as a failure nobody reads."""
        ready = self._ready
        if ready is not None and not ready.cancel() and not ready.cancelled():
            ready.exception()  # done already: read, so asyncio does not log it as lost
        await self.close()

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        """Connect, list the tools, then keep the connection open until `close`."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                info = types.Implementation(name="acp-server", version=__version__)
                asker = self.asker
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        client_info=info,
                        elicitation_callback=asker.elicit,
                        message_handler=asker.on_message,
                    )
                )
                await session.initialize()
                self.tools = await _all_tools(session)
                self.session = session
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            log.info("MCP server %s: %r", self.name, exc, exc_info=True)
            if not ready.done():
                ready.set_exception(McpUnavailable(self._why(exc)))
        finally:
            self.session = None

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.config.transport == "stdio":
            return self._stdio()
        headers = dict(self.config.headers)
        if self.config.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.config.url, headers=headers, httpx_client_factory=self._client)
        return _http(self.config.url, self._client(headers))

    def _client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """The `mcp` package's HTTP client, noting the status of an HTTP error (see `_why`)."""
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "response": [*hooks["response"], self._note_status]}
        return client

    async def _note_status(self, response: httpx2.Response) -> None:
        # 405 is how a server says it offers no event stream for GET: not a failure.
        if response.status_code >= 400 and response.status_code != 405:
            self._http_error = (response.status_code, response.reason_phrase)

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[stdio.Streams]:
        self._process = await stdio.spawn(self.config, self.cwd)
        async with stdio.connected(self._process) as streams:
            yield streams

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool within the call timeout; ToolFailure (for the model) when it fails."""
        session = await self._usable()
        timeout = self.config.call_timeout
        try:
            async with asyncio.timeout(timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolFailure(
                f"The MCP server {self.name!r} did not answer within {timeout:g} s; the call "
                "was abandoned. Do not retry it right away."
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED or self._stopped():
                raise ToolFailure(await self._crashed()) from None
            raise ToolFailure(
                f"The MCP server {self.name!r} refused the call: {exc.message}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            log.info("MCP server %s: %r", self.name, exc)
            raise ToolFailure(await self._crashed()) from None
        if not isinstance(result, types.CallToolResult):
            raise ToolFailure(
                f"The MCP server {self.name!r} answered with something other than a result."
            )
        return result

    async def _usable(self) -> ClientSession:
        """The live session; a server that stopped is started again once."""
        if self.session is not None and not self._stopped():
            return self.session
        if self.broken is None and self._process is not None and self._stopped():
            how = await self._exit()  # it stopped between calls (killed, crashed)
            self.broken = f"{how}{self._last_words()}"
            self.report(f"The MCP server {self.name!r} stopped ({self.broken}); starting it again.")
        if self.restarted or self.broken is None:
            raise ToolFailure(
                f"The MCP server {self.name!r} is not running ({self.broken or 'not connected'}); "
                "its tools cannot be used in this session. Do not call them again."
            )
        self.restarted = True
        await self.close()
        try:
            await self.connect()
        except McpUnavailable as exc:
            self.broken = f"it could not be started again: {exc}"
            self.report(f"The MCP server {self.name!r} stopped and {self.broken}.")
            raise ToolFailure(
                f"The MCP server {self.name!r} stopped and could not be started again; its "
                "tools cannot be used in this session."
            ) from None
        assert self.session is not None
        return self.session

    def _stopped(self) -> bool:
        process = self._process
        stopped = process is not None and process.proc.returncode is not None
        return stopped or self._task is None or self._task.done()

    async def _exit(self) -> str:
        """How the server stopped, for a person."""
        code = None
        if self._process is not None:  # its exit may not have been seen yet
            with contextlib.suppress(TimeoutError):
                code = await asyncio.wait_for(self._process.proc.wait(), 1.0)
        return f"it exited with code {code}" if code is not None else "the connection broke"

    async def _crashed(self) -> str:
        """Say (once, to the user) that the server stopped; the result for the model."""
        how = await self._exit()
        self.broken = f"{how}{self._last_words()}"
        self.report(
            f"The MCP server {self.name!r} stopped during a call ({self.broken}). It will be "
            "started again at the next use of its tools."
        )
        return (
            f"The MCP server {self.name!r} stopped during this call ({how}), so the call has "
            "no result. It will be restarted once if its tools are called again."
        )

    def _why(self, exc: BaseException) -> str:
        """Why connecting failed, for a person."""
        inner = _innermost(exc)
        if isinstance(inner, FileNotFoundError | PermissionError):
            return f"its command {self.config.command!r} could not be started ({inner.strerror})"
        process = self._process
        if process is not None and process.proc.returncode is not None:
            return (
                f"it exited with code {process.proc.returncode} while starting{self._last_words()}"
            )
        if self._http_error is not None:
            return _refused(self.config.url, *self._http_error)
        if self.config.transport != "stdio":
            return f"it could not be reached at {self.config.url} ({_short(inner)})"
        return f"it failed while starting ({_short(inner)}){self._last_words()}"

    def _last_words(self) -> str:
        words = self._process.last_words() if self._process is not None else ""
        return f"; its last output: {words}" if words else ""

    async def close(self) -> None:
        """Disconnect and end its process (bounded)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            # Connected: it winds down by itself; still starting: it is stopped at once.
            done, _ = await asyncio.wait({task}, timeout=5.0 if self.session else 0)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=2.0)
        self.session = None


async def _all_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


@contextlib.asynccontextmanager
async def _http(url: str, client: httpx2.AsyncClient) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client

    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def _refused(url: str, status: int, reason: str) -> str:
    """Why a server that answered with an HTTP error cannot be used, for a person."""
    if status in (401, 403):
        return (
            f"it refused the connection (HTTP {status} {reason}) at {url}: check the headers "
            "given for it, such as an Authorization token that is missing, wrong or expired"
        )
    return f"it answered HTTP {status} {reason} at {url}, so it cannot be used there"


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"
