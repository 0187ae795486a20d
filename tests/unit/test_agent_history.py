"""The history's one owner: every change is recorded as it is made, and no other way exists."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from acp_server.agent.history import History
from acp_server.messages import Message, Role, text_message
from acp_server.store.database import SessionRow, Store
from acp_server.store.transcript import Recorder, restore


class Log:
    """A recorder that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def message(self, message: Message) -> None:
        self.events.append(("message", message.text))

    def history(self, messages: list[Message]) -> None:
        self.events.append(("history", [m.text for m in messages]))

    def truncate(self, length: int) -> None:
        self.events.append(("truncate", length))


def test_each_change_is_recorded_in_the_same_call() -> None:
    log = Log()
    first = text_message("user", "one")
    history = History([first], log)  # given: already recorded
    history.append(text_message("assistant", "two"))
    refused = text_message("user", "three")
    history.append(refused)
    history.append(text_message("assistant", "four"))
    assert history.cut(refused) and not history.cut(refused)
    history.replace([text_message("user", "summary")])
    history.clear()
    assert log.events == [
        ("message", "two"),
        ("message", "three"),
        ("message", "four"),
        ("truncate", 2),
        ("history", ["summary"]),
        ("history", []),
    ]
    assert len(history) == 0


def test_no_list_is_handed_out_so_no_change_can_bypass_it() -> None:
    log = Log()
    history = History([text_message("user", "one")], log)
    assert isinstance(history.messages, tuple)
    history[:].append(text_message("user", "sneaked in"))  # a copy
    with pytest.raises(TypeError):
        history[0] = text_message("user", "replaced")  # type: ignore[index]
    with pytest.raises(AttributeError):
        history.messages.append(text_message("user", "appended"))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        history.extra = []  # type: ignore[attr-defined]
    assert [m.text for m in history] == ["one"] and log.events == []


@pytest.mark.parametrize("seed", range(20))
async def test_what_the_model_sees_is_what_the_store_gives_back(tmp_path: Path, seed: int) -> None:
    """Random appends, cuts, rebuilds and clears on a history recording to a real store: the
    stored session restores to exactly the messages held."""
    rng = random.Random(seed)
    store = Store(tmp_path / "sessions.db")
    store.create(SessionRow("s", str(tmp_path), [], None, 0.0, 0.0, {}))
    recorder = Recorder(store, "s")
    history = History((), recorder)
    for step in range(60):
        choice = rng.random()
        if choice < 0.6 or not history:
            role: Role = "user" if len(history) % 2 == 0 else "assistant"
            history.append(text_message(role, f"{role} {step}"))
        elif choice < 0.75:
            history.cut(history[rng.randrange(len(history))])
        elif choice < 0.95:
            kept = history[rng.randrange(len(history)) :]
            history.replace([text_message("user", f"summary {step}"), *kept])
        else:
            history.clear()
    history.append(text_message("assistant", "the end"))
    recorder.turn_ended("end_turn")  # an ended turn: nothing to mend on restore
    await store.flush("s")
    restored = restore(store.events("s"), store.blob)
    assert restored.repairs == []
    assert restored.history == list(history)
    store.close()
