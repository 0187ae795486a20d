"""Fifty sessions at once on one connection, each running a tool-using turn through the mock
LLM (OpenAI dialect), with seeded cancels sprinkled in.

Every session's turn is the same story with its own words: the model calls `write_file` with
the session's own call id, path and content (a permission request the test answers per session,
allow or reject, seeded), then streams a reply whose every word names the session (`s7w12`).
Some sessions are cancelled (seeded: which, and when: at once, while the tool call streams,
while the permission request waits, while the editor writes the file, before the reply's first
word, while the reply streams). Checked afterwards:

- each prompt is answered once: `cancelled` where a cancel was sent, else `end_turn`; no update
  of a session follows its answer;
- every session/update, permission request and file write carries its own session's id and
  nothing that names another session;
- an uncancelled turn shows the whole reply, and its file was written iff the user allowed it;
- every session answers a second prompt (a strict mock refuses a history with a tool call left
  without its result, so a cancelled call must have been given one).

Reproduce a failure with the seed it prints:
`LOAD_SEED=1234 pytest tests/e2e/test_load_sessions.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.fake_editor import FakeEditor
from tests.support.load import Router
from tests.support.mock_llm import MockLLM, Response
from tests.support.mock_llm.view import conversation
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
SESSIONS = 50
WORDS = 24
MOMENTS = ("at-once", "tool-stream", "permission", "client-write", "reply-head", "reply-stream")
STALL = 30.0  # a cancelled stream stalls this long: the cancel always lands while it runs
TAG = re.compile(r"\[load-session-(\d+)\]")
# Anything that names a session: its words, call id, file, tag.
NAMES = re.compile(r"\bs(\d+)w\d+\b|\bcall_s(\d+)\b|\bnote(\d+)\.txt|load-session-(\d+)")


@dataclass
class Plan:
    k: int
    moment: str | None  # None: not cancelled
    allow: bool
    session: str = ""

    def reply(self) -> str:
        return " ".join(f"s{self.k}w{i}" for i in range(WORDS))


def responder(plans: list[Plan]) -> Callable[[dict[str, Any]], Response]:
    """The model of every session: a tool call, then a reply; a second prompt: one line."""

    def respond(body: dict[str, Any]) -> Response:
        turns = conversation(body)
        users = [t.text for t in turns if t.role == "user"]
        match = TAG.search(users[0]) if users else None
        assert match is not None, "a request without the session's tag"
        plan = plans[int(match.group(1))]
        last = turns[-1]
        # `after`: frames sent before the stall (the first one only says "assistant").
        stall: Response = {"fault": "stall", "seconds": STALL, "after": 2}
        if last.role == "user" and "again" in last.text:
            return {"text": f"s{plan.k}w0 again."}
        if last.role == "user":
            args = {"path": f"note{plan.k}.txt", "content": f"s{plan.k}w99"}
            call = {"id": f"call_s{plan.k}", "name": "write_file", "arguments": args}
            return {"tool_calls": [call], **(stall if plan.moment == "tool-stream" else {})}
        reply: Response = {"text": plan.reply(), "delay_ms": 2}
        if plan.moment == "reply-head":  # the answer's headers, then nothing
            return {**reply, **stall, "after": 0}
        return {**reply, **({**stall, "after": 6} if plan.moment == "reply-stream" else {})}

    return respond


class Crowd:
    """One server, many sessions, one router; the editor's answers per session."""

    def __init__(self, server: RawServer, plans: list[Plan], cwd: Path) -> None:
        self.server = server
        self.router = Router(server)
        self.plans = plans
        self.cwd = cwd
        self.editor = FakeEditor(terminal=False)
        self.cancelled: dict[str, asyncio.Event] = {}
        self.writes: list[dict[str, Any]] = []
        server.handlers["session/request_permission"] = self.permission
        server.handlers["fs/write_text_file"] = self.write

    def plan_of(self, session: str) -> Plan:
        return next(p for p in self.plans if p.session == session)

    async def permission(self, params: dict[str, Any]) -> dict[str, Any]:
        plan = self.plan_of(params["sessionId"])
        if plan.moment == "permission":
            await self.cancelled[plan.session].wait()  # as ACP asks: answer cancelled after
            return {"outcome": {"outcome": "cancelled"}}
        choice = "allow_once" if plan.allow else "reject_once"
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def write(self, params: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(params)
        plan = self.plan_of(params["sessionId"])
        if plan.moment == "client-write":  # the editor is slow to write: done after the cancel
            await self.cancelled[plan.session].wait()
        return await self.editor.write_text_file(params)

    async def open(self, plan: Plan) -> None:
        params = {"cwd": str(self.cwd), "mcpServers": []}
        answer = await self.router.request("session/new", params)
        plan.session = answer["result"]["sessionId"]
        self.cancelled[plan.session] = asyncio.Event()

    async def turn(self, plan: Plan, rng: random.Random) -> Frame:
        """Prompt, cancel at the planned moment, return the answer."""
        text = f"[load-session-{plan.k}] write your note"
        params = {"sessionId": plan.session, "prompt": [{"type": "text", "text": text}]}
        req = await self.server.call("session/prompt", params)
        if plan.moment is not None:
            await self.reach(plan, rng)
            await self.server.notify("session/cancel", {"sessionId": plan.session})
            self.cancelled[plan.session].set()
        return await self.router.answer(req, timeout=60)

    async def reach(self, plan: Plan, rng: random.Random) -> None:
        """Wait for the moment the plan cancels at."""
        updates = self.router.updates[plan.session]
        if plan.moment == "tool-stream":
            await asyncio.sleep(rng.random() * 0.05)
        elif plan.moment == "client-write":
            await self.router.wait_for(lambda: self.writing(plan.session))
        elif plan.moment == "reply-head":
            await self.router.wait_for(lambda: self.tool_done(plan.session))
            await asyncio.sleep(rng.random() * 0.02)
        elif plan.moment == "permission":
            await self.router.wait_for(lambda: self.asked(plan.session))
        elif plan.moment == "reply-stream":
            await self.router.wait_for(
                lambda: any(u["sessionUpdate"] == "agent_message_chunk" for u in updates)
            )

    def writing(self, session: str) -> bool:
        return any(
            r["method"] == "fs/write_text_file" and r["params"]["sessionId"] == session
            for r in self.router.requests
        )

    def tool_done(self, session: str) -> bool:
        return any(
            u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
            for u in self.router.updates[session]
        )

    def asked(self, session: str) -> bool:
        return any(
            r["method"] == "session/request_permission" and r["params"]["sessionId"] == session
            for r in self.router.requests
        )


def make_plans(rng: random.Random) -> list[Plan]:
    plans = []
    for k in range(SESSIONS):
        moment = rng.choice(MOMENTS) if rng.random() < 0.4 else None
        allow = moment == "client-write" or rng.random() < 0.7  # a write needs the user's yes
        plans.append(Plan(k, moment, allow))
    return plans


def names_in(value: Any) -> set[int]:
    """The session numbers anything in `value` names."""
    found = NAMES.findall(json.dumps(value))
    return {int(next(g for g in groups if g)) for groups in found}


async def test_fifty_sessions_on_one_connection_with_cancels(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, figures: Any
) -> None:
    seed = int(os.environ.get("LOAD_SEED") or random.randrange(2**32))
    figures("seed", f"LOAD_SEED={seed}")
    rng = random.Random(seed)
    plans = make_plans(rng)
    mock_llm.responder = responder(plans)
    mock_llm.strict_tools = True
    mock_llm.set(context_length=32768)
    env = {
        "OPENAI_BASE_URL": f"{mock_llm.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        "ACP_SERVER_DISCOVER": "0",
    }
    server = await server_factory("--model", "openai:mock-model", env=env)
    crowd = Crowd(server, plans, tmp_path)
    caps = crowd.editor.capabilities()
    await crowd.router.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    for plan in plans:
        await crowd.open(plan)
    started = time.perf_counter()
    turns = await asyncio.gather(*(crowd.turn(p, random.Random(rng.random())) for p in plans))
    figures("50 concurrent turns", f"{time.perf_counter() - started:.2f} s (seed {seed})")
    for plan, answer in zip(plans, turns, strict=True):
        check_turn(crowd, plan, answer, seed)
        late = max(crowd.router.update_at[plan.session]) > crowd.router.answer_at[answer["id"]]
        assert not late, (seed, plan, "an update of the turn came after its answer")
    check_no_crossing(crowd, seed)
    await again(crowd, seed)
    check_no_crossing(crowd, seed)
    cancelled = sum(p.moment is not None for p in plans)
    figures("sessions", f"{SESSIONS}, {cancelled} cancelled, seed {seed}")


def check_turn(crowd: Crowd, plan: Plan, answer: dict[str, Any], seed: int) -> None:
    assert "result" in answer, (seed, plan, answer)
    expected = "end_turn" if plan.moment is None else "cancelled"
    assert answer["result"]["stopReason"] == expected, (seed, plan, answer)
    updates = crowd.router.updates[plan.session]
    said = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    written = [w for w in crowd.writes if w["sessionId"] == plan.session]
    if plan.moment is None:
        assert said == plan.reply(), (seed, plan, said)
        assert len(written) == int(plan.allow), (seed, plan, written)
        assert crowd.asked(plan.session), (seed, plan, "no permission was asked")
    finals = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status")]
    if plan.moment == "permission":  # the call cancelled while it waited was marked failed
        assert finals and finals[-1]["status"] == "failed", (seed, plan, finals)


def check_no_crossing(crowd: Crowd, seed: int) -> None:
    """Nothing a session was sent names another session."""
    for plan in crowd.plans:
        for update in crowd.router.updates[plan.session]:
            assert names_in(update) <= {plan.k}, (seed, plan, update)
    for request in crowd.router.requests:
        plan = crowd.plan_of(request["params"]["sessionId"])
        assert names_in(request["params"]) <= {plan.k}, (seed, plan, request)
        if request["method"] == "session/request_permission":
            assert request["params"]["toolCall"]["toolCallId"] == f"call_s{plan.k}", seed


async def again(crowd: Crowd, seed: int) -> None:
    """Every session answers a second prompt normally."""

    async def one(plan: Plan) -> None:
        text = f"[load-session-{plan.k}] again"
        params = {"sessionId": plan.session, "prompt": [{"type": "text", "text": text}]}
        answer = await crowd.router.request("session/prompt", params, timeout=60)
        assert answer.get("result", {}).get("stopReason") == "end_turn", (seed, plan, answer)

    await asyncio.gather(*(one(p) for p in crowd.plans))
    assert crowd.plans[0].session  # the crowd was opened
    await crowd.router.close()
