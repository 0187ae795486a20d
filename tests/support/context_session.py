"""A long tool-heavy session against the mock LLM, for the context tests.

`start_reader` starts the real `acp-server` (OpenAI dialect, or the `model` given) against the
mock with its `file_reader` responder (or one given), opens a session in `cwd`, and returns a
`ReaderSession` whose `ask(name)` prompts "read NAME and say how it begins" and returns the turn
as seen. `write_files` makes files whose first word is unique, so each answer can be checked
against the file that was read. `read_until` asks for files until what a test needs has happened
(a summary requested, so many compactions): how many turns that takes depends on the system
prompt, which names the working directory, so a test never counts on a number of turns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.mock_llm import MockLLM, Recorded
from tests.support.mock_llm.responders import file_reader
from tests.support.mock_llm.view import conversation, is_summary
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
LINE = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor\n"


def write_files(folder: Path, count: int, size: int, prefix: str = "file") -> list[str]:
    """`count` files of about `size` characters; file N begins with the word `wordN`."""
    names = []
    for n in range(count):
        name = f"{prefix}{n}.txt"
        body = f"word{n} begins this file.\n" + LINE * (size // len(LINE))
        (folder / name).write_text(body, encoding="utf-8")
        names.append(name)
    return names


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def said(seen: list[dict[str, Any]]) -> str:
    """The agent's message text of a turn."""
    return "".join(
        u["content"]["text"] for u in seen if u["sessionUpdate"] == "agent_message_chunk"
    )


def compactions(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The final state of each compaction a turn showed (card or compaction_update)."""
    finals = []
    for update in seen:
        kind = update["sessionUpdate"]
        card = kind == "tool_call_update" and str(update["toolCallId"]).startswith("compact_")
        if (kind == "compaction_update" and update["status"] != "in_progress") or (
            card and update.get("status") in ("completed", "failed")
        ):
            finals.append(update)
    return finals


@dataclass
class Turn:
    stop: str
    seen: list[dict[str, Any]]
    answer: Frame

    @property
    def text(self) -> str:
        return said(self.seen)


@dataclass
class ReaderSession:
    server: RawServer
    session: str
    mock: MockLLM
    turns: list[Turn] = field(default_factory=list)

    async def prompt(self, text: str, timeout: float = 30) -> Turn:
        params = {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]}
        req = await self.server.call("session/prompt", params)
        answer, before = await self.server.response(req, timeout=timeout)
        assert "result" in answer, answer
        turn = Turn(answer["result"]["stopReason"], updates_of(before), answer)
        self.turns.append(turn)
        return turn

    async def ask(self, name: str) -> Turn:
        return await self.prompt(f"Please read {name} and tell me how it begins.")

    async def read_until(self, names: list[str], done: Callable[[], bool], limit: int = 24) -> None:
        """Ask for `names` in turn (each answer checked) until `done()`, in at most `limit`
        turns; fails if it never happens."""
        for _ in range(limit):
            if done():
                return
            n = len(self.turns) % len(names)
            turn = await self.ask(names[n])
            assert turn.stop == "end_turn", turn.text
            assert f"word{n}" in turn.text, turn.text
        assert done(), f"not reached in {limit} turns"


async def start_reader(
    server_factory: Start,
    mock: MockLLM,
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    capabilities: dict[str, Any] | None = None,
    model: str = "openai:mock-model",
) -> ReaderSession:
    if mock.responder is None:
        mock.responder = file_reader()
    environment = {
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        "ACP_SERVER_RETRY_ATTEMPTS": "2",
        "ACP_SERVER_RETRY_BASE_DELAY": "0.01",
        **(env or {}),
    }
    server = await server_factory("--model", model, *args, env=environment)
    init = {"protocolVersion": 1, "clientCapabilities": capabilities or {}}
    await server.request("initialize", init)
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return ReaderSession(server, answer["result"]["sessionId"], mock)


def summary_requests(mock: MockLLM) -> list[Recorded]:
    """The chat requests that offered no tools: compaction summaries."""
    return [r for r in mock.chat_requests if is_summary(r.json)]


def turn_requests(mock: MockLLM) -> list[Recorded]:
    return [r for r in mock.chat_requests if not is_summary(r.json)]


def overflowed_only_unknowing(mock: MockLLM) -> bool:
    """No request was refused as too long, but perhaps the first: it is sent before the
    server's window is known (the lookup runs beside it, for the configured or default
    window), and the full tool set alone no longer fits 4,096 tokens. Its refusal teaches the
    window; none may follow."""
    return mock.overflows in ([], mock.chat_requests[:1])


def has_tool_shapes(request: Recorded) -> bool:
    """Tools offered, a tool-role message, or a tool call in the request."""
    body = request.json
    if "tools" in body or "tool_choice" in body:
        return True
    return any(t.role == "tool" or t.calls for t in conversation(body))
