"""End-to-end test: the official ACP Python SDK (PyPI ``agent-client-protocol``,
import name ``acp``) acts as the client and drives the real ``acp-server``
console script over stdio.

Flow: initialize -> session/new -> prompt ("hello", streamed, end_turn) ->
slow prompt cancelled with session/cancel after the first chunk (result
``cancelled``, not an error) -> one more prompt that ends normally.

The server runs with ``--script`` (a scripted model backend); every model
request consumes the next round of the script, across turns.  The server argv
comes from the ``conformance`` fixture, which records the wire traffic and
validates every frame against the ACP schema at teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, cast

import pytest
from acp import Client, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
)

TIMEOUT = 30.0  # seconds; upper bound for every single protocol step

HELLO_TEXT = "Hello from the script."
SLOW_TEXT = " ".join(f"slow{i}" for i in range(30))
SLOW_DELAY_MS = 100  # 30 words * 100 ms = ~3 s if nobody cancels
FINAL_TEXT = "Back again."


class RecordingClient:
    """Minimal ACP client: records session updates and refuses permissions.

    Exceptions raised inside notification handlers are only logged by the SDK,
    so this class never asserts; it records, and the test asserts afterwards.
    """

    def __init__(self) -> None:
        self.session_ids: set[str] = set()
        self.other_updates: list[Any] = []
        self.permission_requests: list[ToolCallUpdate] = []
        self.chunks: list[AgentMessageChunk] = []
        self.first_chunk = asyncio.Event()

    def start_turn(self) -> list[AgentMessageChunk]:
        """Begin collecting agent_message_chunk updates into a fresh list."""
        self.chunks = []
        self.first_chunk = asyncio.Event()
        return self.chunks

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.session_ids.add(session_id)
        if isinstance(update, AgentMessageChunk):
            self.chunks.append(update)
            self.first_chunk.set()
        else:
            self.other_updates.append(update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        # The script has no tool calls, so this should never happen; record it
        # and answer with the always-valid "cancelled" outcome.
        self.permission_requests.append(tool_call)
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


def _texts(chunks: list[AgentMessageChunk]) -> list[str]:
    out: list[str] = []
    for chunk in chunks:
        assert isinstance(chunk.content, TextContentBlock), (
            f"non-text agent_message_chunk: {chunk!r}"
        )
        out.append(chunk.content.text)
    return out


def _message_ids(chunks: list[AgentMessageChunk]) -> set[str | None]:
    return {chunk.message_id for chunk in chunks}


async def test_python_sdk_client_end_to_end(tmp_path: Path, conformance: Any) -> None:
    script = [
        {"text": HELLO_TEXT},
        {"text": SLOW_TEXT, "delay_ms": SLOW_DELAY_MS},
        {"text": FINAL_TEXT},
    ]
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(script), encoding="utf-8")
    work_dir = tmp_path / "work"
    work_dir.mkdir()

    argv = conformance.server_argv("--script", str(script_path))
    client = RecordingClient()

    async with spawn_agent_process(
        # RecordingClient implements only what this flow needs; the SDK answers
        # the other client methods with "method not found". Subclassing the
        # acp.Client Protocol instead would register its no-op stubs as handlers.
        cast(Client, client),
        argv[0],
        *argv[1:],
        env=dict(os.environ),
        # The SDK pipes the agent's stderr by default and never reads it (which
        # can also block a chatty agent); inherit it so server logs stay visible.
        transport_kwargs={"stderr": None},
    ) as (conn, process):
        # --- initialize -----------------------------------------------------
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="acp-server-e2e-python-sdk", version="0.0.0"),
            ),
            TIMEOUT,
        )
        assert init.protocol_version == 1
        assert init.agent_info is not None, "initialize response lacks agentInfo"
        assert init.agent_info.name
        assert init.agent_info.version

        # --- session/new ----------------------------------------------------
        session = await asyncio.wait_for(
            conn.new_session(cwd=str(work_dir.resolve()), mcp_servers=[]), TIMEOUT
        )
        session_id = session.session_id
        assert session_id

        # --- turn 1: "hello", streamed, end_turn ----------------------------
        chunks = client.start_turn()
        response = await asyncio.wait_for(
            conn.prompt(session_id=session_id, prompt=[text_block("hello")]), TIMEOUT
        )
        assert response.stop_reason == "end_turn"
        texts = _texts(chunks)
        assert "".join(texts) == HELLO_TEXT
        assert len(texts) > 1, f"expected the reply to be streamed in several chunks, got {texts!r}"
        first_ids = _message_ids(chunks)
        assert len(first_ids) == 1, (
            f"chunks of one message carry different messageIds: {first_ids!r}"
        )

        # --- turn 2: slow prompt, cancelled after the first chunk -----------
        chunks = client.start_turn()
        prompt_task = asyncio.create_task(
            conn.prompt(session_id=session_id, prompt=[text_block("tell me something slowly")])
        )
        try:
            first_chunk = asyncio.create_task(client.first_chunk.wait())
            done, _ = await asyncio.wait(
                {prompt_task, first_chunk}, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
            first_chunk.cancel()
            if not done:
                pytest.fail(f"no agent_message_chunk within {TIMEOUT}s of the slow prompt")
            if prompt_task in done and not client.first_chunk.is_set():
                pytest.fail(
                    f"slow prompt finished before streaming anything: {prompt_task.result()!r}"
                )

            await asyncio.wait_for(conn.cancel(session_id=session_id), TIMEOUT)

            try:
                response = await asyncio.wait_for(prompt_task, TIMEOUT)
            except RequestError as exc:
                pytest.fail(
                    f"cancelled prompt was answered with an error instead of a result: {exc!r}"
                )
        finally:
            if not prompt_task.done():
                prompt_task.cancel()
        assert response.stop_reason == "cancelled"
        partial = "".join(_texts(chunks))
        assert partial, "no text streamed before the cancelled response"
        assert SLOW_TEXT.startswith(partial), (
            f"cancelled turn streamed unexpected text: {partial!r}"
        )
        assert len(partial) < len(SLOW_TEXT), (
            "the whole slow reply was streamed despite session/cancel"
        )

        # Nothing of the cancelled turn may arrive after its prompt response.
        late = client.start_turn()
        await asyncio.sleep(5 * SLOW_DELAY_MS / 1000)
        assert late == [], (
            f"agent_message_chunk received after the cancelled turn ended: {_texts(late)!r}"
        )

        # --- turn 3: the session is still usable ----------------------------
        chunks = client.start_turn()
        response = await asyncio.wait_for(
            conn.prompt(session_id=session_id, prompt=[text_block("are you still there?")]), TIMEOUT
        )
        assert response.stop_reason == "end_turn"
        assert "".join(_texts(chunks)) == FINAL_TEXT
        last_ids = _message_ids(chunks)
        assert len(last_ids) == 1, f"chunks of one message carry different messageIds: {last_ids!r}"
        if None not in first_ids and None not in last_ids:
            assert first_ids != last_ids, "two different messages share a messageId"

    assert client.session_ids == {session_id}, (
        f"session/update for unknown sessions: {client.session_ids!r}"
    )
    assert client.permission_requests == [], "unexpected session/request_permission"
    # Leaving the context closed the server's stdin; a stdio agent should exit
    # on its own (the SDK waits 2 s before it resorts to SIGTERM).
    assert process.returncode == 0, f"server exit status after stdin EOF: {process.returncode}"
