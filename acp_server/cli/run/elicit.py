"""How `acp-server run` answers the server's `elicitation/create` (a form: the model's
ask_user, or an MCP server's question).

At a terminal (stdin a TTY) each field of the form is asked on stderr in turn: a choice with a
single key (1-9), several choices as numbers on one line, text, a number or yes/no as a line;
an empty answer leaves an optional field out, Ctrl-D declines the whole form, and Ctrl-C
cancels the turn (the question answers `cancel`). With stdin piped nobody can be asked: the
form is declined, saying so on stderr. Waits are registered with the permission asker
(`permission.Permissions`), so the Ctrl-C that cancels the turn ends them too.
"""

from __future__ import annotations

import sys
import termios
import tty
from typing import Any

from acp_server.cli.run.permission import Permissions, read_line
from acp_server.cli.run.printer import is_terminal
from acp_server.wire.jsonrpc import Params

Answer = dict[str, Any]
MARK = "[question]"


class Declined(Exception):
    """The user ended input (Ctrl-D) or the turn was cancelled."""


class Questions:
    """Answers form elicitations on the terminal, or declines them when stdin is piped."""

    def __init__(self, permissions: Permissions, fd: int | None = None) -> None:
        self.permissions = permissions
        self.err = permissions.err
        terminal = fd is not None or is_terminal(sys.stdin)
        self.fd = fd if fd is not None else (sys.stdin.fileno() if terminal else None)

    async def answer(self, params: Params) -> Answer:
        message = str(params.get("message") or "")
        if params.get("mode") != "form":
            self._say(f"\n{MARK} declined: `acp-server run` only answers forms ({message})")
            return {"action": "decline"}
        self.permissions.printer.interject()
        if self.fd is None:
            self._say(
                f"\n{MARK} {message}\n{MARK} declined: stdin is not a terminal, so "
                "`acp-server run` cannot ask you; the agent is told you did not answer."
            )
            return {"action": "decline"}
        self._say(f"\n{MARK} {message}  (Ctrl-D: do not answer)")
        schema = params.get("requestedSchema") or {}
        required = set(schema.get("required") or [])
        content: dict[str, Any] = {}
        try:
            for name, field in (schema.get("properties") or {}).items():
                value = await self._field(field, name in required)
                if value is not None:
                    content[name] = value
        except Declined:
            return {"action": "cancel" if self.permissions.cancelled else "decline"}
        return {"action": "accept", "content": content}

    async def _field(self, field: dict[str, Any], required: bool) -> Any:
        title = str(field.get("title") or field.get("description") or "Answer")
        kind = field.get("type")
        choices = _choices(field)
        while True:
            if choices and kind == "string":
                value = await self._one_of(title, choices, required)
            elif choices and kind == "array":
                value = await self._some_of(title, choices)
            else:
                typed = await self._line(f"  {title}{'' if required else ' (optional)'}: ")
                value = _parse(typed, kind)
            if value is not None or not required:
                return value
            self._say("  Please answer (or press Ctrl-D to leave the question).")

    async def _one_of(self, title: str, choices: list[tuple[str, str]], required: bool) -> Any:
        self._say(f"  {title}:")
        for number, (_, label) in enumerate(choices, 1):
            self._say(f"    [{number}] {label}")
        if len(choices) > 9:
            typed = await self._line("  Type a number and Enter: ")
        else:
            hint = "" if required else ", Enter to skip"
            typed = await self._key(f"  Press 1-{len(choices)}{hint}: ")
        index = int(typed) - 1 if typed.strip().isdigit() else -1
        return choices[index][0] if 0 <= index < len(choices) else None

    async def _some_of(self, title: str, choices: list[tuple[str, str]]) -> list[str]:
        self._say(f"  {title} (several):")
        for number, (_, label) in enumerate(choices, 1):
            self._say(f"    [{number}] {label}")
        typed = await self._line("  Type the numbers, e.g. 1 3, and Enter: ")
        picked = [int(n) - 1 for n in typed.replace(",", " ").split() if n.isdigit()]
        return [choices[i][0] for i in dict.fromkeys(picked) if 0 <= i < len(choices)]

    async def _key(self, prompt: str) -> str:
        fd = self._fd()
        saved = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd, termios.TCSANOW)
            typed = (await self._line(prompt)).strip()[:1]
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
        self._say(typed)  # not echoed: say what was answered
        return typed

    async def _line(self, prompt: str) -> str:
        """One line typed; Declined at the end of input or when the turn is cancelled."""
        self.err.write(prompt)
        self.err.flush()
        # In the permissions' waiting set: a Ctrl-C that cancels the turn ends it.
        typed = await read_line(self._fd(), self.permissions.waiting)
        if typed is None or self.permissions.cancelled or "\x04" in typed:
            raise Declined
        return typed.strip()

    def _fd(self) -> int:
        assert self.fd is not None
        return self.fd

    def _say(self, text: str) -> None:
        print(text, file=self.err, flush=True)


def _choices(field: dict[str, Any]) -> list[tuple[str, str]]:
    """(value, label) of a single- or multi-select field; [] for any other."""
    source = field.get("items") if field.get("type") == "array" else field
    source = source if isinstance(source, dict) else {}
    titled = source.get("oneOf") or source.get("anyOf")
    if isinstance(titled, list):
        return [(str(o.get("const")), str(o.get("title") or o.get("const"))) for o in titled]
    plain = source.get("enum")
    return [(str(v), str(v)) for v in plain] if isinstance(plain, list) else []


def _parse(typed: str, kind: Any) -> Any:
    """A typed line as the field's type; None when empty or not of that type."""
    if not typed:
        return None
    if kind == "boolean":
        return {"y": True, "n": False}.get(typed[:1].lower())
    if kind in ("integer", "number"):
        try:
            return int(typed) if kind == "integer" else float(typed)
        except ValueError:
            return None
    return typed
