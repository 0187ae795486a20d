"""Slash commands: a table of commands the agent handles itself instead of sending to the model.

ACP has no command request: the editor shows the commands an agent announces
(`available_commands_update`) and sends the one the user picks as ordinary prompt text, such as
`/compact focus on the parser`. This module is pure (it knows no session): a `CommandTable` of
`Command`s, the parser that tells an invocation from a prompt, the announcement and the help.
The session makes a table from `BUILTIN` (others add theirs: `/model`, `/mode`), announces it
after `session/new`, `load` and `resume`, and runs an invocation against itself as the
`CommandContext`:

    table = CommandTable(BUILTIN)
    invocation = table.parse(prompt_blocks)
    if invocation is None: ...send the prompt to the model...
    else: await invocation.run(session)           # the session implements CommandContext

Parsing, decided here once:
- a command is `/name` at the very start of the prompt's first block, a text block (leading
  whitespace ignored), followed by whitespace or the end; names match case-insensitively;
- an unknown `/word` is not a command: the prompt goes to the model as text (a path such as
  `/usr/lib is empty` is text too);
- the argument is the rest of that first block plus what follows it: later text blocks as they
  are, a file mention (`resource_link`, embedded `resource`) as its URI, so `/compact focus on
  @parser.py` reads naturally. Blocks a command cannot take as text (images, audio) are left
  out and named in `Invocation.ignored`, so the session can say so instead of dropping them
  silently.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from acp_server.errors import InvalidParams

_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_INVOCATION = re.compile(r"/([A-Za-z][A-Za-z0-9_-]*)(?=\s|$)(.*)", re.DOTALL)


class CommandContext(Protocol):
    """What a command may do to the session it runs in (the session implements this)."""

    @property
    def commands(self) -> CommandTable:
        """The session's commands (for /help)."""
        ...

    async def compact(self, focus: str) -> None:
        """Compact the conversation now; `focus` (may be empty) is passed to the summary."""

    async def clear(self) -> None:
        """Start a fresh model context; the stored transcript keeps the earlier conversation."""

    async def say(self, text: str) -> None:
        """Show the user a message from the agent."""

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        """Set a config option (`mode`, `model`, `thought_level`) as session/set_config_option
        does (InvalidParams for an unknown option or value); the options after the change."""
        ...

    def describe_choices(self, config_id: str) -> str:
        """A config option's choices in words, the current one marked."""
        ...


Handler = Callable[[CommandContext, str], Awaitable[None]]


@dataclass(frozen=True)
class Command:
    """One slash command: `name` without the slash, a `description` for the editor's menu, and
    a `hint` when it takes text after its name (shown while the text is missing)."""

    name: str
    description: str
    handler: Handler
    hint: str | None = None

    def available(self) -> dict[str, Any]:
        """The command as ACP's `AvailableCommand`."""
        entry: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint:
            entry["input"] = {"hint": self.hint}
        return entry


@dataclass(frozen=True)
class Invocation:
    """A prompt that invokes `command` with `argument` (stripped; may be empty)."""

    command: Command
    argument: str
    ignored: tuple[str, ...] = ()  # the types of the blocks left out (images, audio)

    async def run(self, context: CommandContext) -> None:
        await self.command.handler(context, self.argument)

    def ignored_note(self) -> str | None:
        """For a person, when blocks were left out; None when nothing was."""
        if not self.ignored:
            return None
        what = ", ".join(sorted(set(self.ignored)))
        return (
            f"/{self.command.name} takes text only, so it left out what was attached ({what}). "
            "Send that as a separate message to show it to the model."
        )


class CommandTable:
    """The commands of a session, in the order they are shown. Add to it with `add`."""

    def __init__(self, commands: Iterable[Command] = ()) -> None:
        self._commands: dict[str, Command] = {}
        for command in commands:
            self.add(command)

    def add(self, command: Command) -> None:
        """Register a command; a malformed or repeated name is a programming error."""
        if not _NAME.fullmatch(command.name):
            raise ValueError(
                f"a command name is lowercase letters, digits, - and _: {command.name!r}"
            )
        if command.name in self._commands:
            raise ValueError(f"the command /{command.name} is already registered")
        self._commands[command.name] = command

    def get(self, name: str) -> Command | None:
        return self._commands.get(name.lower())

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def __len__(self) -> int:
        return len(self._commands)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._commands

    def parse(self, prompt: Sequence[dict[str, Any]]) -> Invocation | None:
        """The invocation a prompt (ACP content blocks) makes; None when it is not one."""
        first = prompt[0] if prompt else None
        if not isinstance(first, dict) or first.get("type") != "text":
            return None
        match = _INVOCATION.match(str(first.get("text", "")).lstrip())
        command = self.get(match.group(1)) if match else None
        if match is None or command is None:
            return None
        pieces, ignored = [match.group(2)], []
        for block in prompt[1:]:
            text = _as_text(block)
            if text is None:
                ignored.append(str(block.get("type", "unknown")))
            else:
                pieces.append(text)
        return Invocation(command, " ".join(p.strip() for p in pieces if p.strip()), tuple(ignored))

    def update(self) -> dict[str, Any]:
        """The `available_commands_update` announcing this table (the session adds the id)."""
        return {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [command.available() for command in self],
        }

    def help_text(self) -> str:
        """What /help shows: every command with what it does."""
        lines = ["Commands (type them at the start of a message):", ""]
        for command in self:
            usage = f"/{command.name}" + (f" [{command.hint}]" if command.hint else "")
            lines.append(f"- `{usage}`: {command.description}")
        lines += ["", "Anything else that starts with / is sent to the model as ordinary text."]
        return "\n".join(lines)


def _as_text(block: Any) -> str | None:
    """A later prompt block as argument text; None for a block a command cannot take."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource_link":
        return str(block.get("uri", ""))
    if kind == "resource" and isinstance(block.get("resource"), dict):
        return str(block["resource"].get("uri", ""))
    return None


# ----- the built-in commands ------------------------------------------------------------------


async def _compact(context: CommandContext, argument: str) -> None:
    await context.compact(argument)


async def _clear(context: CommandContext, argument: str) -> None:
    await context.clear()
    if argument:
        await context.say(
            "The context is cleared. (/clear takes no text; what followed it was not used.)"
        )


async def _help(context: CommandContext, argument: str) -> None:
    await context.say(context.commands.help_text())


def _chooser(config_id: str) -> Handler:
    """The handler of `/model` or `/mode`: list the choices, or make one."""

    async def handler(context: CommandContext, argument: str) -> None:
        if not argument:
            await context.say(context.describe_choices(config_id))
            return
        try:
            options = context.choose(config_id, argument)
        except InvalidParams:
            listing = context.describe_choices(config_id)
            await context.say(f"`{argument}` is not one of the choices.\n\n{listing}")
            return
        chosen = next((o for o in options if o["id"] == config_id), None)
        name = _value_name(chosen, argument) if chosen else argument
        await context.say(f"{config_id.capitalize()}: {name}.")

    return handler


def _value_name(option: dict[str, Any], value: str) -> str:
    for item in option.get("options", []):
        for entry in item.get("options", [item]):
            if entry.get("value") == value:
                return f"{entry['name']} (`{value}`)"
    return f"`{value}`"


COMPACT = Command(
    "compact",
    "Summarize the conversation so far to free room in the model's context window. Text after "
    "the command says what the summary should focus on.",
    _compact,
    hint="what the summary should focus on (optional)",
)
CLEAR = Command(
    "clear",
    "Start over with an empty context in this session. The earlier conversation stays in the "
    "session's saved history, but the model no longer sees it.",
    _clear,
)
HELP = Command("help", "List the commands this agent understands.", _help)
MODEL = Command(
    "model",
    "Switch to another model; the conversation carries over. Without an id, list the models.",
    _chooser("model"),
    hint="model id (optional: without it, the list)",
)
MODE = Command(
    "mode",
    "Change how much the agent may do without asking. Without an id, list the modes.",
    _chooser("mode"),
    hint="mode id (optional: without it, the list)",
)
BUILTIN: tuple[Command, ...] = (COMPACT, CLEAR, HELP)
# The commands of a session with a choice of models (added to its table after BUILTIN).
CHOICE_COMMANDS: tuple[Command, ...] = (MODEL, MODE)
