"""A session's model choice, in process: switching (with carry-over), thought levels, what the
store keeps, images refused, and the /model and /mode commands run through the table.

The model source is a `ModelSource` whose `backend` gives scripted backends (one per model, so
each test sees which model was asked); sessions are made by the registry as the protocol makes
them, with the real store in the test's private data directory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.backends import Backend
from acp_server.backends.scripted import ScriptedBackend
from acp_server.errors import InvalidParams
from acp_server.messages import (
    Event,
    ImagePart,
    Message,
    ModelRequest,
    Notice,
    StreamError,
    TextDelta,
    TextPart,
    text_message,
)
from acp_server.models.catalogue import ModelEntry
from acp_server.models.source import ModelSource
from acp_server.session.commands.table import BUILTIN, CHOICE_COMMANDS, CommandTable
from acp_server.session.model import ImageRetry
from acp_server.session.registry import Sessions
from acp_server.session.session import Session
from acp_server.settings import Settings
from acp_server.updates import Update
from tests.support.fake_editor import FakeEditor, InProcessClient

MODELS = ("openai:gpt-5-mini", "anthropic:claude-sonnet-4-5", "ollama:llama3")


class ScriptedSource(ModelSource):
    """Models offered as configured, answered by scripts: `scripts[value]` rounds each."""

    def __init__(self, values: tuple[str, ...], config: Path | None = None) -> None:
        super().__init__(values, {"ACP_SERVER_DISCOVER": "0"}, config)
        self.scripts: dict[str, ScriptedBackend] = {}

    def backend(self, entry: ModelEntry) -> Backend:
        return ByName(self, entry.value)

    def answer(self, value: str, *rounds: dict[str, Any]) -> ScriptedBackend:
        self.scripts[value] = ScriptedBackend.from_rounds(list(rounds))
        return self.scripts[value]


class ByName:
    """The script of a model as the test sets it when the model is asked."""

    def __init__(self, source: ScriptedSource, value: str) -> None:
        self.source = source
        self.label = value

    async def context_window(self) -> int | None:
        return None

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        script = self.source.scripts.setdefault(self.label, ScriptedBackend.from_rounds([]))
        return script.stream(request)


class Shown(list[tuple[str, Update]]):
    def __call__(self, session_id: str, update: Update) -> None:
        self.append((session_id, update))

    def option_updates(self) -> list[list[dict[str, Any]]]:
        return [u["configOptions"] for _, u in self if u["sessionUpdate"] == "config_option_update"]


@pytest.fixture
def shown() -> Shown:
    return Shown()


@pytest.fixture
def source() -> ScriptedSource:
    return ScriptedSource(MODELS)


@pytest.fixture
def sessions(source: ScriptedSource, shown: Shown) -> Sessions:
    editor = FakeEditor(fs=False, terminal=False)
    return Sessions(
        backends=lambda: ScriptedBackend.from_rounds([]),
        editors=lambda _id: InProcessClient(editor),
        send_update=shown,
        settings=Settings(),
        models=source,
    )


@pytest.fixture
async def session(sessions: Sessions, tmp_path: Path) -> AsyncIterator[Session]:
    yield sessions.new(tmp_path, (), None)
    sessions.shutdown()


def current(options: list[dict[str, Any]], config_id: str) -> Any:
    found = [o["currentValue"] for o in options if o["id"] == config_id]
    return found[0] if found else None


async def ask(session: Session, text: str) -> None:
    outcome = await session.prompt(text_message("user", text))
    assert outcome.stop == "end_turn", outcome


# ----- switching -------------------------------------------------------------------------------


async def test_a_switch_carries_the_history_over_at_once_and_the_next_turn_uses_the_new_model(
    session: Session, source: ScriptedSource
) -> None:
    first = source.answer("openai:gpt-5-mini", {"text": "Noted, PELICAN."})
    await ask(session, "Remember PELICAN.")
    session.history.append(text_message("user", "a prompt that was never answered"))
    session.choose("model", "anthropic:claude-sonnet-4-5")
    assert [m.text for m in session.history] == ["Remember PELICAN.", "Noted, PELICAN."]
    claude = source.answer("anthropic:claude-sonnet-4-5", {"text": "Still PELICAN."})
    await ask(session, "What word?")
    assert len(first.requests) == 1 and len(claude.requests) == 1
    assert "PELICAN" in str(claude.requests[0].messages)


async def test_a_switch_during_a_turn_waits_for_it_and_carries_over_before_the_next_prompt(
    session: Session, source: ScriptedSource
) -> None:
    slow = source.answer("openai:gpt-5-mini", {"text": "slow answer", "delay_ms": 50})
    running = asyncio.create_task(ask(session, "first"))
    while not slow.requests:
        await asyncio.sleep(0.001)
    session.choose("model", "ollama:llama3")
    await running  # the running turn finished with the model it started with
    assert [m.text for m in session.history] == ["first", "slow answer"]
    llama = source.answer("ollama:llama3", {"text": "second answer"})
    await ask(session, "second")
    assert [m.text for m in llama.requests[0].messages] == ["first", "slow answer", "second"]


async def test_the_thought_level_is_re_clamped_and_announced_after_a_switch(
    session: Session, source: ScriptedSource, shown: Shown
) -> None:
    options = session.choose("thought_level", "minimal")
    assert current(options, "thought_level") == "minimal"
    options = session.choose("model", "anthropic:claude-sonnet-4-5")
    assert current(options, "thought_level") == "low"  # Sonnet 4.5 has no "minimal"
    assert shown.option_updates()[-1] == options
    options = session.choose("model", "ollama:llama3")
    assert current(options, "thought_level") is None  # a model that does not think first
    assert [o["id"] for o in options] == ["mode", "model"]
    claude = source.answer("anthropic:claude-sonnet-4-5", {"text": "ok"})
    session.choose("model", "anthropic:claude-sonnet-4-5")
    await ask(session, "hi")
    assert claude.requests[0].thought_level == "low"


async def test_unknown_options_and_values_are_refused_naming_them(session: Session) -> None:
    with pytest.raises(InvalidParams, match="'nope:x'"):
        session.choose("model", "nope:x")
    with pytest.raises(InvalidParams, match="'extreme'"):
        session.choose("thought_level", "extreme")
    with pytest.raises(InvalidParams, match="'colour'"):
        session.choose("colour", "blue")


async def test_the_choice_and_the_carried_history_come_back_on_restore(
    sessions: Sessions, session: Session, source: ScriptedSource, tmp_path: Path
) -> None:
    source.answer("openai:gpt-5-mini", {"text": "Noted."})
    await ask(session, "Remember PELICAN.")
    session.choose("model", "anthropic:claude-sonnet-4-5")
    session.choose("thought_level", "high")
    restored = await sessions.restore(session.id, tmp_path, (), None, replay=False)
    assert current(restored.config_options(), "model") == "anthropic:claude-sonnet-4-5"
    assert current(restored.config_options(), "thought_level") == "high"
    assert restored.history == session.history  # nothing marked interrupted by the switch


async def test_a_config_file_sets_the_default_model_and_mode(tmp_path: Path, shown: Shown) -> None:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "ollama:llama3"\ndefault_mode = "plan"\n', encoding="utf-8")
    source = ScriptedSource((), config)
    editor = FakeEditor(fs=False, terminal=False)
    sessions = Sessions(
        backends=lambda: ScriptedBackend.from_rounds([]),
        editors=lambda _id: InProcessClient(editor),
        send_update=shown,
        settings=Settings(),
        models=source,
    )
    session = sessions.new(tmp_path, (), None)
    assert session.mode == "plan"
    assert current(session.config_options(), "model") == "ollama:llama3"
    sessions.shutdown()


# ----- images ----------------------------------------------------------------------------------


class RefusesImagesOnce:
    label = "refuses"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        self.requests.append(request)
        if len(self.requests) == 1:
            yield StreamError("The model cannot read images", images_refused=True)
            return
        yield TextDelta("a note was read")


async def test_a_refused_image_marks_the_model_text_only_and_asks_once_more() -> None:
    inner = RefusesImagesOnce()
    refused: list[bool] = []
    backend = ImageRetry(inner, lambda: refused.append(True))
    picture = Message("user", (TextPart("look"), ImagePart("AAAA", "image/png")))
    events = [e async for e in backend.stream(ModelRequest((picture,)))]
    assert refused == [True]
    assert [type(e) for e in events] == [Notice, TextDelta]
    assert not any(isinstance(p, ImagePart) for p in inner.requests[1].messages[0].content)


async def test_a_refusal_is_learned_by_the_source(session: Session, source: ScriptedSource) -> None:
    assert session.choice is not None and session.choice.entry is not None
    entry = source.learned_text_only(session.choice.entry)
    assert entry.images is False
    found = source.catalogue().find(entry.value)
    assert found is not None and found.images is False


# ----- /model and /mode ------------------------------------------------------------------------


class Context:
    """The command context of a session: what this branch's Session gives, plus `say`."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.commands = CommandTable((*BUILTIN, *CHOICE_COMMANDS))
        self.said: list[str] = []

    async def compact(self, focus: str) -> None: ...

    async def clear(self) -> None: ...

    async def say(self, text: str) -> None:
        self.said.append(text)

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        return self.session.choose(config_id, value)

    def describe_choices(self, config_id: str) -> str:
        return self.session.describe_choices(config_id)


async def run(context: Context, text: str) -> str:
    invocation = context.commands.parse([{"type": "text", "text": text}])
    assert invocation is not None
    await invocation.run(context)
    return context.said[-1]


async def test_slash_model_lists_and_switches(session: Session) -> None:
    context = Context(session)
    listing = await run(context, "/model")
    assert "`openai:gpt-5-mini`: gpt-5-mini (current)" in listing
    assert "`ollama:llama3`" in listing
    said = await run(context, "/model ollama:llama3")
    assert "llama3" in said
    assert current(session.config_options(), "model") == "ollama:llama3"
    said = await run(context, "/model gpt-9")
    assert "`gpt-9` is not one of the choices" in said and "`ollama:llama3`" in said


async def test_slash_mode_lists_and_switches(session: Session) -> None:
    context = Context(session)
    assert "`plan`" in await run(context, "/mode")
    await run(context, "/mode plan")
    assert session.mode == "plan"
