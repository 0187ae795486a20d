"""The session in process: its queue, cancel, the store behind it, and its own model.

Sessions are made by the registry the way the protocol makes them, with a scripted model, the
in-process editor and the real store (in the test's private data directory). Each test runs in
milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.backends import Backend
from acp_server.backends.scripted import ScriptedBackend
from acp_server.messages import Message, history_problems, text_message
from acp_server.session.registry import Sessions
from acp_server.session.session import PromptOutcome, Session
from acp_server.settings import Settings, store_path
from acp_server.store.database import Store
from acp_server.store.transcript import restore
from acp_server.updates import Update
from tests.support.fake_editor import FakeEditor, InProcessClient
from tests.support.store_faults import MARKER, refuse_marked_events

Rounds = list[dict[str, Any]]


class Shown:
    """Every session/update the sessions sent, in order, with its session id."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Update]] = []

    def __call__(self, session_id: str, update: Update) -> None:
        self.sent.append((session_id, update))

    def replies(self, session_id: str) -> list[str]:
        """The text of the agent message chunks shown in one session."""
        return [
            u["content"]["text"]
            for sid, u in self.sent
            if sid == session_id and u["sessionUpdate"] == "agent_message_chunk"
        ]

    def reply(self, session_id: str) -> str:
        return "".join(self.replies(session_id))


def registry(backends: Iterator[Backend], shown: Shown) -> Sessions:
    editor = FakeEditor(fs=False, terminal=False)
    return Sessions(
        backends=lambda: next(backends),
        editors=lambda _session_id: InProcessClient(editor),
        send_update=shown,
        settings=Settings(),
    )


@pytest.fixture
def shown() -> Shown:
    return Shown()


@pytest.fixture
def new_session(tmp_path: Path, shown: Shown) -> Callable[..., Session]:
    """A new session of a registry whose sessions get these backends, one each."""

    def make(*backends: Backend) -> Session:
        return registry(iter(backends), shown).new(tmp_path, (), None)

    return make


def ask(session: Session, text: str) -> asyncio.Task[PromptOutcome]:
    return asyncio.create_task(session.prompt(text_message("user", text)))


async def until(ready: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not ready():
            await asyncio.sleep(0.001)


def script(*rounds: dict[str, Any]) -> ScriptedBackend:
    return ScriptedBackend.from_rounds(list(rounds))


async def test_prompts_are_served_one_after_the_other_in_arrival_order(
    new_session: Callable[..., Session], shown: Shown
) -> None:
    backend = script(
        {"text": "first answer", "delay_ms": 5},
        {"text": "second answer", "expect": {"contains": ["first question", "first answer"]}},
    )
    session = new_session(backend)
    first = ask(session, "first question")
    await until(lambda: bool(backend.requests))
    second = ask(session, "second question")
    assert await first == PromptOutcome("end_turn")
    assert await second == PromptOutcome("end_turn")
    assert shown.reply(session.id) == "first answersecond answer"
    assert [m.text for m in session.history] == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]


async def test_a_cancel_ends_the_running_turn_and_every_queued_prompt(
    new_session: Callable[..., Session], shown: Shown
) -> None:
    backend = script({"text": "one two three four five", "delay_ms": 50}, {"text": "Back."})
    session = new_session(backend)
    running = ask(session, "first")
    await until(lambda: bool(shown.replies(session.id)))
    queued = [ask(session, "second"), ask(session, "third")]
    await asyncio.sleep(0)  # both are waiting for the running turn
    session.cancel()
    outcomes = await asyncio.gather(running, *queued)
    assert [o.stop for o in outcomes] == ["cancelled"] * 3
    assert len(backend.requests) == 1  # the queued prompts never reached the model
    assert await ask(session, "fourth") == PromptOutcome("end_turn")
    assert shown.reply(session.id).endswith("Back.")
    assert history_problems(session.history) == []
    assert "second" not in [m.text for m in session.history]


async def test_a_turn_the_store_cannot_save_is_told_and_later_turns_are_saved(
    new_session: Callable[..., Session], shown: Shown
) -> None:
    session = new_session(script({"text": "Noted."}, {"text": "Lost."}, {"text": "Still here."}))
    assert await ask(session, "hello") == PromptOutcome("end_turn")
    refuse_marked_events(store_path())

    failed = await ask(session, f"remember {MARKER}")
    assert failed.stop == "end_turn"
    assert failed.not_saved is not None and "could not be saved" in failed.not_saved
    assert failed.not_saved in shown.reply(session.id)  # told in the chat, not only in _meta

    assert await ask(session, "and this") == PromptOutcome("end_turn")
    store = Store(store_path())
    try:
        saved = restore(store.events(session.id), store.blob).history
    finally:
        store.close()
    assert f"remember {MARKER}" not in texts(saved)  # the refused write, really refused
    assert texts(saved)[:2] == ["hello", "Noted."]
    assert texts(saved)[-2:] == ["and this", "Still here."]


async def test_a_new_backend_answers_the_next_turn_with_the_whole_history(
    new_session: Callable[..., Session], shown: Shown
) -> None:
    first = script({"text": "The answer is 42."})
    second = script(
        {
            "expect": {
                "roles": ["user", "assistant", "user"],
                "contains": ["What is the answer?", "The answer is 42.", "And the question?"],
            },
            "text": "That one is harder.",
        }
    )
    session = new_session(first)
    assert await ask(session, "What is the answer?") == PromptOutcome("end_turn")
    session.set_backend(second)
    assert session.backend is second
    assert await ask(session, "And the question?") == PromptOutcome("end_turn")
    assert len(first.requests) == 1
    assert second.requests[0].messages[:2] == tuple(session.history[:2])
    assert shown.reply(session.id) == "The answer is 42.That one is harder."


async def test_a_backend_set_during_a_turn_answers_from_the_next_turn(
    new_session: Callable[..., Session], shown: Shown
) -> None:
    first = script({"text": "slow words from the first", "delay_ms": 10}, {"text": "never"})
    second = script({"text": "From the second."})
    session = new_session(first)
    running = ask(session, "one")
    await until(lambda: bool(shown.replies(session.id)))
    session.set_backend(second)
    assert await running == PromptOutcome("end_turn")
    assert shown.reply(session.id) == "slow words from the first"
    assert await ask(session, "two") == PromptOutcome("end_turn")
    assert shown.reply(session.id).endswith("From the second.")
    assert (len(first.requests), len(second.requests)) == (1, 1)


async def test_each_session_of_a_registry_plays_its_own_backend(
    tmp_path: Path, shown: Shown
) -> None:
    backends = iter([script({"text": "Alpha."}), script({"text": "Beta."})])
    sessions = registry(backends, shown)
    a, b = sessions.new(tmp_path, (), None), sessions.new(tmp_path, (), None)
    assert a.backend is not b.backend
    outcomes = await asyncio.gather(ask(b, "hi"), ask(a, "hi"))
    assert list(outcomes) == [PromptOutcome("end_turn")] * 2
    assert (shown.reply(a.id), shown.reply(b.id)) == ("Alpha.", "Beta.")


def texts(history: list[Message]) -> list[str]:
    return [m.text for m in history]
