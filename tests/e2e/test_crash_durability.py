"""Crash durability: 200 prompt turns on one session, with the server killed (SIGKILL) at
seeded random moments (just after a prompt was sent, mid-stream, mid-tool, or while idle) and
restarted after each kill. After every restart:

- every prompt whose `session/prompt` answer had been written before the kill is replayed by
  `session/load` (its unique text, exactly once); an unanswered prompt may or may not be there;
- `PRAGMA integrity_check` on the SQLite file (opened read-only) says ok;
- the session accepts a prompt that ends `end_turn`, and the model saw every answered prompt
  (`expect`) in a well-formed history: the scripted backend rejects a history with unanswered
  tool calls, so an interrupted turn must have been repaired.

Reproduce a failure with the seed it prints: `ACP_CRASH_SEED=<seed> pytest <this file>`.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.raw import Frame, RawServer, stop_reason

Start = Callable[..., Any]
SEED = int(os.environ.get("ACP_CRASH_SEED", "20261130"))
TURNS = 200
WORDS = " ".join(f"w{i}" for i in range(30))
KINDS = ("quick", "stream", "tool")
WIDE_WINDOW = ("--context-window", "1000000")


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def texts(frames: list[Frame], kind: str) -> list[str]:
    return [u["content"]["text"] for u in updates_of(frames) if u["sessionUpdate"] == kind]


def update_of_kind(kind: str) -> Callable[[Frame], bool]:
    def match(frame: Frame) -> bool:
        return bool(
            frame.get("method") == "session/update"
            and frame["params"]["update"]["sessionUpdate"] == kind
        )

    return match


def rounds_for(kind: str, n: int, slow: bool) -> list[dict[str, Any]]:
    """The rounds of turn `n`. Only the turn the server is killed in is `slow` (a stream with
    pauses, a command that sleeps), so that the kill can land inside it."""
    reply = f"reply {n}."
    if kind == "quick":
        return [{"text": reply}]
    if kind == "stream":
        return [{"text": f"{WORDS} {reply}", "delay_ms": 12 if slow else 0, "chunk_chars": 20}]
    assert kind == "tool"
    command = "sleep 0.1; echo done" if slow else "echo done"
    call = {"name": "run_command", "arguments": {"command": command}}
    return [{"text": "Running it.", "tool_calls": [call]}, {"text": reply}]


def integrity(db_path: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA integrity_check").fetchall()
    finally:
        db.close()


class Crashes:
    """One session across many server processes; tracks which prompts were answered."""

    def __init__(
        self, server_factory: Start, script: Any, workdir: Path, data: Path, rng: random.Random
    ):
        self.start_server = server_factory
        self.script = script
        self.workdir = workdir
        self.db = data / "sessions.sqlite3"
        self.rng = rng
        self.session: str | None = None
        self.confirmed: list[str] = []  # prompts whose answer was read before a kill
        self.unconfirmed: set[str] = set()  # sent, answer never seen
        self.turn = 0
        self.moments: Counter[str] = Counter()
        self.processes = 0

    def text(self, n: int) -> str:
        return f"prompt {n} #{self.rng.randrange(10**9):09d}"

    async def open(self, rounds: list[dict[str, Any]]) -> RawServer:
        # A window all 200 turns fit: the model must see every answered prompt verbatim, so no
        # compaction may summarize them (the scripted model reports no window: 8,192 applies).
        script = str(self.script(rounds))
        server: RawServer = await self.start_server("--script", script, *WIDE_WINDOW)
        self.processes += 1
        await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        if self.session is None:
            answer = await server.request(
                "session/new", {"cwd": str(self.workdir), "mcpServers": []}
            )
            self.session = answer["result"]["sessionId"]
            answer = await server.request(
                "session/set_mode", {"sessionId": self.session, "modeId": "bypass"}
            )
            assert answer["result"] == {}
            return server
        req = await server.call(
            "session/load",
            {"sessionId": self.session, "cwd": str(self.workdir), "mcpServers": []},
        )
        answer, replay = await server.response(req, timeout=30)
        assert "result" in answer, f"load failed: {answer}"
        assert answer["result"]["modes"]["currentModeId"] == "bypass"
        seen = Counter(texts(replay, "user_message_chunk"))
        lost = [t for t in self.confirmed if seen[t] != 1]
        assert not lost, f"answered prompts not replayed exactly once: {lost}"
        strange = [t for t in seen if t not in self.unconfirmed and t not in self.confirmed]
        assert not strange, f"replayed prompts never sent: {strange}"
        assert all(count == 1 for count in seen.values()), f"replayed twice: {seen}"
        return server

    async def finish(self, server: RawServer, kind: str, n: int, first: bool) -> None:
        """Send turn `n` and let it end: `end_turn`, with its scripted reply."""
        text = self.text(n)
        req = await self.prompt(server, text)
        answer, before = await server.response(req, timeout=20)
        said = "".join(texts(before, "agent_message_chunk"))
        assert stop_reason(answer.get("result")) == "end_turn", (answer, said)
        assert said.endswith(f"reply {n}."), f"turn {n} ({kind}, first={first}): {said!r}"
        self.confirmed.append(text)

    async def prompt(self, server: RawServer, text: str) -> int:
        assert self.session is not None
        return int(
            await server.call(
                "session/prompt",
                {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]},
            )
        )

    async def kill_during(self, server: RawServer, kind: str, n: int) -> None:
        """Send turn `n` and kill the server at a random moment of it."""
        text = self.text(n)
        self.unconfirmed.add(text)
        req = await self.prompt(server, text)
        if kind == "stream" and self.rng.random() < 0.7:
            moment = "mid-stream"
            for _ in range(self.rng.randint(1, 5)):  # of 6 chunks
                await server.until(update_of_kind("agent_message_chunk"), timeout=20)
        elif kind == "tool" and self.rng.random() < 0.8:
            moment = "mid-tool"
            await server.until(update_of_kind("tool_call"), timeout=20)
            await asyncio.sleep(self.rng.uniform(0, 0.12))
        else:
            moment = "after-send"
            await asyncio.sleep(self.rng.uniform(0, 0.04))
        self.moments[moment] += 1
        await self.kill(server)
        if any(f.get("id") == req and "method" not in f for f in server.seen):
            self.moments["answered-before-kill"] += 1
            self.unconfirmed.discard(text)
            self.confirmed.append(text)

    async def kill(self, server: RawServer) -> None:
        os.kill(server.proc.pid, signal.SIGKILL)
        assert await server.wait(timeout=10) == -signal.SIGKILL
        assert integrity(self.db) == [("ok",)]

    async def run(self) -> None:
        while self.turn < TURNS:
            count = min(self.rng.randint(1, 10), TURNS - self.turn)
            kinds = [self.rng.choice(KINDS) for _ in range(count)]
            idle = count == 1 or self.rng.random() < 0.1
            rounds: list[dict[str, Any]] = []
            for i, kind in enumerate(kinds):
                rounds += rounds_for(kind, self.turn + i, slow=i == count - 1 and not idle)
            if self.session is not None:
                # The first turn after a restart checks what the model gets.
                rounds[0]["expect"] = {"contains": list(self.confirmed)}
            server = await self.open(rounds)
            for i, kind in enumerate(kinds):
                n = self.turn
                self.turn += 1
                if i == count - 1 and not idle:
                    await self.kill_during(server, kind, n)
                    break
                await self.finish(server, kind, n, first=i == 0)
            else:
                self.moments["idle"] += 1
                await self.kill(server)
        # A last restart: everything answered is there, and the session still works.
        last = rounds_for("quick", TURNS, slow=False)
        last[0]["expect"] = {"contains": list(self.confirmed)}
        server = await self.open(last)
        await self.finish(server, "quick", TURNS, first=True)
        await server.close_stdin()
        assert await server.wait() == 0
        assert integrity(self.db) == [("ok",)]


async def test_sigkill_at_random_moments_loses_no_answered_prompt(
    server_factory: Start, script: Any, tmp_path: Path, private_data_dir: Path
) -> None:
    print(f"crash durability seed: {SEED} (ACP_CRASH_SEED={SEED} reproduces this run)")
    workdir = tmp_path / "project"
    workdir.mkdir()
    crashes = Crashes(server_factory, script, workdir, private_data_dir, random.Random(SEED))
    began = time.monotonic()
    try:
        await crashes.run()
    except Exception as exc:
        raise AssertionError(
            f"seed {SEED}, turn {crashes.turn}: {type(exc).__name__}: {exc}"
        ) from exc
    print(
        f"{TURNS} turns, {crashes.processes} processes in {time.monotonic() - began:.1f} s; "
        f"kill moments: {dict(crashes.moments)}"
    )
    assert crashes.moments["mid-stream"] and crashes.moments["mid-tool"]
    assert crashes.moments["after-send"] and crashes.moments["idle"]
