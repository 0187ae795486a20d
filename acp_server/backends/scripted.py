"""A deterministic backend that plays a script: the backbone of e2e tests, demos and conformance
scripts for ACP clients. Public interface, documented in docs/client-authors.md ("Scripted
backend") and in `schemas/script.schema.json`.

The script is a JSON array of rounds, or JSONL with one round per line (or, for in-process tests,
the same rounds as a list: `ScriptedBackend.from_rounds`). Each model request
consumes the next round, across turns and sessions of one server process. A round may stream a
`thought`, then `text`, then ask for `tool_calls`, report `usage`, and end with `finish` (or with
an `error`; one worded like a server's context-overflow error is reported as an overflow).
When the script runs out, each further request answers with a short notice.

A compaction's summary request (`purpose == "summary"`) consumes no round: it is answered with
`SCRIPTED_SUMMARY`, so a script plays the same however often the conversation is compacted.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from acp_server import schemas
from acp_server.backends.overflow import parse_overflow
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ImagePart,
    ModelRequest,
    StreamError,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
    history_problems,
)

EXHAUSTED = "(The script has no more rounds.)"
SCRIPTED_SUMMARY = "Summary (scripted): the conversation so far was a scripted exchange."
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "refusal",
    "tool_calls": "tool_calls",
}
_WORD = re.compile(r"\s*\S+\s*|\s+")


class ScriptError(Exception):
    """The script file is missing or malformed; the message says where and how."""


def load_script(path: Path) -> list[dict[str, Any]]:
    """Read and validate a script file (JSON array or JSONL)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"Cannot read the script {path}: {exc.strerror or exc}.") from exc
    try:
        if text.lstrip().startswith("["):
            rounds = json.loads(text)
        else:
            rounds = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise ScriptError(f"The script {path} is not valid JSON or JSONL: {exc}.") from exc
    return check_rounds(rounds, f"The script {path}")


def check_rounds(rounds: Any, name: str) -> list[dict[str, Any]]:
    """`rounds` if they follow `script.schema.json`; else a ScriptError naming the first problem."""
    found = schemas.problems("script.schema.json", rounds)
    if found:
        detail = found[0].replace("`[", "`round [", 1)
        raise ScriptError(f"{name} is malformed: {detail}.")
    result: list[dict[str, Any]] = rounds
    return result


def chunks(text: str, size: int | None) -> Iterator[str]:
    """Split text into deltas: `size` characters each, or one word (with its spaces) each."""
    if size:
        for i in range(0, len(text), size):
            yield text[i : i + size]
    else:
        yield from _WORD.findall(text)


class ScriptedBackend:
    """Plays rounds from a script file (read at the first request) or from a list of rounds.
    Built from a list (in-process tests), it records every request it was sent in `requests`;
    from a file (the server's one backend for all sessions) it keeps none, or the process would
    grow with every prompt it ever answered."""

    def __init__(self, path: Path, *, record: bool = False) -> None:
        self.path = path
        self._rounds: list[dict[str, Any]] | None = None
        self._next = 0
        self.requests: list[ModelRequest] = []
        self._record = record
        # Tool-call ids the script leaves out are made unique per process run: ACP wants
        # them unique within a session, and a session outlives the process.
        self._run = secrets.token_hex(3)

    @classmethod
    def from_rounds(cls, rounds: list[dict[str, Any]]) -> ScriptedBackend:
        """A backend playing `rounds` (the script file's schema, checked now): no file needed."""
        backend = cls(Path("rounds"), record=True)  # the path only names the label
        backend._rounds = check_rounds(list(rounds), "The list of script rounds")
        return backend

    @property
    def label(self) -> str:
        return f"scripted:{self.path.name}"

    async def context_window(self) -> int | None:
        return None

    def rounds(self) -> list[dict[str, Any]]:
        if self._rounds is None:
            self._rounds = load_script(self.path)
        return self._rounds

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        if self._record:
            self.requests.append(request)
        broken = history_problems(request.messages)
        if broken:
            # Like a strict OpenAI-compatible endpoint: a malformed history is rejected.
            yield StreamError("The conversation sent to the model is malformed: " + broken[0])
            return
        if request.purpose == "summary":
            yield TextDelta(SCRIPTED_SUMMARY)
            yield Finish("stop")
            return
        try:
            rounds = self.rounds()
        except ScriptError as exc:
            yield StreamError(str(exc))
            return
        if self._next >= len(rounds):
            yield TextDelta(EXHAUSTED)
            yield Finish("stop")
            return
        number = self._next
        self._next += 1
        failed = unmet(rounds[number].get("expect"), request)
        if failed:
            yield StreamError(f"Script round {number}: the request did not match: {failed}.")
            return
        async for event in _play(rounds[number], f"{self._run}_{number}"):
            yield event


def unmet(expect: dict[str, Any] | None, request: ModelRequest) -> str | None:
    """Why `request` breaks the round's `expect` checks (None: it meets them)."""
    if not expect:
        return None
    roles = [m.role for m in request.messages]
    if "roles" in expect and roles != expect["roles"]:
        return f"roles were {roles}, expected {expect['roles']}"
    offered = {t.name for t in request.tools}
    missing_tools = [t for t in expect.get("tools", []) if t not in offered]
    if missing_tools:
        return f"tools {missing_tools} were not offered"
    unwanted = [t for t in expect.get("not_tools", []) if t in offered]
    if unwanted:
        return f"tools {unwanted} were offered"
    text = "\n".join(_request_texts(request))
    missing = [s for s in expect.get("contains", []) if s not in text]
    return f"missing {missing}" if missing else None


def _request_texts(request: ModelRequest) -> Iterator[str]:
    yield request.system
    for message in request.messages:
        yield message.text
        yield from (f"[image ({p.mime_type})]" for p in message.content if isinstance(p, ImagePart))
        for call in message.tool_calls:
            yield f"{call.name} {json.dumps(call.arguments)}"


async def _play(spec: dict[str, Any], number: str) -> AsyncIterator[Event]:
    # Each delta arrives on its own, as from a real model: the loop runs in between (even
    # without a delay), so the agent relays it as its own chunk instead of one burst.
    delay = float(spec.get("delay_ms", 0)) / 1000
    size = spec.get("chunk_chars")
    for piece in chunks(spec.get("thought", ""), size):
        await asyncio.sleep(delay)
        yield ThoughtDelta(piece)
    for piece in chunks(spec.get("text", ""), size):
        await asyncio.sleep(delay)
        yield TextDelta(piece)
    calls = spec.get("tool_calls", [])
    for i, call in enumerate(calls):
        if delay:
            await asyncio.sleep(delay)
        call_id = call.get("id") or f"call_{number}_{i}"
        yield ToolCallDelta(i, call_id, call["name"], json.dumps(call["arguments"]))
    if "usage" in spec:
        yield Usage(spec["usage"]["prompt_tokens"], spec["usage"]["completion_tokens"])
    if "error" in spec:
        # Worded like a server's overflow, it is reported as one (as the HTTP backends do).
        yield StreamError(spec["error"], parse_overflow(spec["error"]))
        return
    yield Finish(_FINISH[spec.get("finish") or ("tool_calls" if calls else "stop")])
