"""Slash commands: the table, telling an invocation from a prompt, the announcement (checked
against the official ACP schema), /help, and the built-in handlers against a fake session."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from acp_server.session.commands.table import (
    BUILTIN,
    CLEAR,
    COMPACT,
    HELP,
    Command,
    CommandContext,
    CommandTable,
    Invocation,
)
from tests.support.acp_schema import WireValidator, schema_path


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


IMAGE = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
LINK = {"type": "resource_link", "uri": "file:///w/parser.py", "name": "parser.py"}


@dataclass
class FakeSession:
    """A CommandContext that records what the commands asked of it."""

    commands: CommandTable = field(default_factory=lambda: CommandTable(BUILTIN))
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def compact(self, focus: str) -> None:
        self.calls.append(("compact", focus))

    async def clear(self) -> None:
        self.calls.append(("clear", ""))

    async def say(self, text: str) -> None:
        self.calls.append(("say", text))

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        self.calls.append(("choose", f"{config_id}={value}"))
        return []

    def describe_choices(self, config_id: str) -> str:
        return f"the choices of {config_id}"


async def switch_model(context: CommandContext, argument: str) -> None:
    await context.say(f"switched to {argument}")


MODEL = Command("model", "Switch the model.", switch_model, hint="model name")


# ----- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "name", "argument"),
    [
        ([text("/compact")], "compact", ""),
        ([text("/compact focus on the parser")], "compact", "focus on the parser"),
        ([text("  \n/help  ")], "help", ""),
        (
            [text("/Compact  keep the plan\nand the files ")],
            "compact",
            "keep the plan\nand the files",
        ),
        (
            [text("/compact focus on "), LINK, text(" please")],
            "compact",
            "focus on file:///w/parser.py please",
        ),
        (
            [text("/compact"), {"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}],
            "compact",
            "file:///a",
        ),
    ],
)
def test_an_invocation(prompt: list[dict[str, Any]], name: str, argument: str) -> None:
    invocation = CommandTable(BUILTIN).parse(prompt)
    assert invocation is not None
    assert (invocation.command.name, invocation.argument) == (name, argument)
    assert invocation.ignored == () and invocation.ignored_note() is None


@pytest.mark.parametrize(
    "prompt",
    [
        [text("/unknown do things")],  # an unknown /word goes to the model as text
        [text("/usr/lib is empty, why?")],
        [text("/help/me")],
        [text("please /compact")],
        [text("/")],
        [text("")],
        [IMAGE, text("/compact")],  # a command starts the prompt's first block
        [LINK],
        [],
    ],
)
def test_not_an_invocation(prompt: list[dict[str, Any]]) -> None:
    assert CommandTable(BUILTIN).parse(prompt) is None


def test_blocks_a_command_cannot_take_are_named_not_dropped_silently() -> None:
    invocation = CommandTable(BUILTIN).parse([text("/compact the parser"), IMAGE, IMAGE])
    assert invocation is not None and invocation.argument == "the parser"
    assert invocation.ignored == ("image", "image")
    note = invocation.ignored_note()
    assert note is not None and "/compact" in note and "image" in note


def test_a_command_added_to_the_table_is_recognized() -> None:
    table = CommandTable(BUILTIN)
    assert table.parse([text("/model qwen3")]) is None
    table.add(MODEL)
    assert table.parse([text("/model qwen3")]) == Invocation(MODEL, "qwen3")


# ----- the table --------------------------------------------------------------------------------


def test_the_table_keeps_order_and_refuses_bad_or_repeated_names() -> None:
    table = CommandTable(BUILTIN)
    table.add(MODEL)
    assert [c.name for c in table] == ["compact", "clear", "help", "model"]
    assert len(table) == 4 and "HELP" in table and "nope" not in table
    assert table.get("Clear") is CLEAR
    with pytest.raises(ValueError, match="already registered"):
        table.add(Command("help", "again", switch_model))
    with pytest.raises(ValueError, match="command name"):
        table.add(Command("/model", "with a slash", switch_model))
    with pytest.raises(ValueError, match="command name"):
        table.add(Command("two words", "spaces", switch_model))


def test_the_announcement() -> None:
    table = CommandTable(BUILTIN)
    table.add(MODEL)
    update = table.update()
    assert update["sessionUpdate"] == "available_commands_update"
    names = [(c["name"], c.get("input")) for c in update["availableCommands"]]
    assert names == [
        ("compact", {"hint": "what the summary should focus on (optional)"}),
        ("clear", None),
        ("help", None),
        ("model", {"hint": "model name"}),
    ]
    assert all(c["description"] for c in update["availableCommands"])


def test_the_announcement_matches_the_official_schema() -> None:
    path = schema_path()
    table = CommandTable(BUILTIN)
    table.add(MODEL)
    for update in (table.update(), CommandTable().update()):
        frame = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "sess_1", "update": update},
        }
        assert WireValidator(path).check_agent_line(json.dumps(frame), {}) == []
    # The check has teeth: an input without its hint is refused.
    entry = {"name": "x", "description": "y", "input": {}}
    bad = {"sessionUpdate": "available_commands_update", "availableCommands": [entry]}
    frame = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": bad},
    }
    assert WireValidator(path).check_agent_line(json.dumps(frame), {}) != []


def test_help_lists_every_command() -> None:
    table = CommandTable(BUILTIN)
    table.add(MODEL)
    help_text = table.help_text()
    for command in table:
        assert f"/{command.name}" in help_text and command.description in help_text
    assert "[model name]" in help_text
    assert "sent to the model as ordinary text" in help_text


# ----- the built-in handlers --------------------------------------------------------------------


async def run(prompt: str, session: FakeSession) -> None:
    invocation = session.commands.parse([text(prompt)])
    assert invocation is not None
    await invocation.run(session)


async def test_compact_passes_its_focus() -> None:
    session = FakeSession()
    await run("/compact keep the failing test", session)
    await run("/compact", session)
    assert session.calls == [("compact", "keep the failing test"), ("compact", "")]


async def test_clear_and_text_after_it() -> None:
    session = FakeSession()
    await run("/clear", session)
    assert session.calls == [("clear", "")]
    await run("/clear everything please", session)
    assert session.calls[1] == ("clear", "")
    assert session.calls[2][0] == "say" and "takes no text" in session.calls[2][1]


async def test_help_says_the_table_of_the_session() -> None:
    session = FakeSession()
    session.commands.add(MODEL)
    await run("/help", session)
    assert session.calls == [("say", session.commands.help_text())]
    assert "/model" in session.calls[0][1]


def test_the_builtins() -> None:
    assert BUILTIN == (COMPACT, CLEAR, HELP)
