"""An MCP server's questions (MCP `elicitation/create`) asked of the user through the editor
(ACP `elicitation/create`), on the session and the tool call that runs the server's tool.

A form is forwarded as an ACP form when the editor advertised `elicitation.form`; a URL (a
sign-in page, say) as an ACP URL elicitation when it advertised `elicitation.url`, and the
server's `notifications/elicitation/complete` becomes ACP `elicitation/complete`. Otherwise,
or when no call of the server's tools is running (nobody to ask on behalf of), the server is
told the request was declined. The question and what the user did are shown with the call's
result (so a loaded session shows them too). A call that ends (a cancel of the turn)
withdraws its open questions, and the server hears `cancel`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import mcp.types as types

from acp_server import updates
from acp_server.tools.base import ToolContext, ToolOutcome

log = logging.getLogger(__name__)
SCHEMA_KEYS = ("type", "title", "description", "properties", "required")


@dataclass
class Call:
    """One call of the server's tools: its open questions, and what was asked and answered
    (shown with its result, so the stored session keeps it)."""

    ctx: ToolContext
    asking: set[asyncio.Task[dict[str, Any]]] = field(default_factory=set)
    asked: list[str] = field(default_factory=list)

    def shown_with(self, outcome: ToolOutcome) -> ToolOutcome:
        """`outcome` with the questions of the call before what it shows."""
        if not self.asked:
            return outcome
        content = outcome.content or [updates.text_content(outcome.text)]
        questions = [updates.text_content(text) for text in self.asked]
        return replace(outcome, content=[*questions, *content])


class Asker:
    """Where one server's questions go: the editor of the call of its tools running now."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._calls: list[Call] = []
        self._urls: dict[str, ToolContext] = {}  # elicitation id -> the call that opened it

    @contextlib.contextmanager
    def calling(self, ctx: ToolContext) -> Iterator[Call]:
        """While one of the server's tools runs for `ctx`: its questions go there."""
        call = Call(ctx)
        self._calls.append(call)
        try:
            yield call
        finally:
            self._calls.remove(call)
            for task in call.asking:  # the call ended (cancelled): its questions go away
                task.cancel()

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The `mcp` package's elicitation callback. Several calls of the server's tools at
        once: the question goes to the one started last."""
        call = self._calls[-1] if self._calls else None
        request = self._request(params, call.ctx if call else None)
        if call is None or request is None:
            return types.ElicitResult(action="decline")
        task = asyncio.create_task(call.ctx.client.elicit(request, call.ctx.call_id))
        call.asking.add(task)
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            call.asking.discard(task)
        if task.cancelled():  # the call ended while the question was open
            return types.ElicitResult(action="cancel")
        failure = task.exception()
        if failure is not None:
            log.warning("MCP server %s asked the editor: %s", self.server, failure)
            return types.ElicitResult(action="decline")
        answer = task.result()
        call.asked.append(_shown(request, answer))
        return _result(answer)

    def _request(self, params: Any, ctx: ToolContext | None) -> dict[str, Any] | None:
        """The ACP request for the server's, None when this editor cannot show it."""
        if ctx is None:
            return None
        message = f"The MCP server {self.server!r} asks: {params.message}"
        if isinstance(params, types.ElicitRequestURLParams):
            if not ctx.client.can_elicit_url or not _web_address(params.url):
                return None
            elicitation_id = params.elicitation_id or f"elicit_{uuid.uuid4().hex}"
            self._urls[elicitation_id] = ctx
            return {
                "mode": "url",
                "message": message,
                "url": params.url,
                "elicitationId": elicitation_id,
            }
        if not ctx.client.can_elicit_form:
            return None
        given = params.requested_schema if isinstance(params.requested_schema, dict) else {}
        schema = {key: given[key] for key in SCHEMA_KEYS if key in given}
        schema["type"] = "object"
        return {"mode": "form", "message": message, "requestedSchema": schema}

    async def on_message(self, message: Any) -> None:
        """The `mcp` package's message handler: a URL elicitation the server says is done."""
        if isinstance(message, types.ElicitCompleteNotification):
            ctx = self._urls.pop(message.params.elicitation_id, None)
            if ctx is not None:
                ctx.client.elicitation_complete(message.params.elicitation_id)


def _shown(request: dict[str, Any], answer: dict[str, Any]) -> str:
    """The question and what the user did, for the call's content."""
    said = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}
    return (
        f"{request['message']}\n\nThe user {said.get(str(answer.get('action')), 'did not answer')}."
    )


def _web_address(url: str) -> bool:
    """An http(s) address with a host: what the user may be sent to (a `file:` or `javascript:`
    URL from a server is declined)."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and url.isprintable()


def _result(answer: dict[str, Any]) -> types.ElicitResult:
    action = answer.get("action")
    if action == "accept":
        content = answer.get("content")
        return types.ElicitResult(
            action="accept", content=content if isinstance(content, dict) else None
        )
    return types.ElicitResult(action="cancel" if action == "cancel" else "decline")
