"""How `acp-server run` answers the server's `session/request_permission`.

Three policies, chosen from the command line: `--yes` allows every call; at a terminal (stdin a
TTY) the user is asked, y / n / a (always), answered with a single key; otherwise (stdin
piped) nobody can be asked and the call is refused, saying which flag would allow it. The
question goes to stderr, never into the reply on stdout. Ctrl-C while a question waits answers
it `cancelled`, as ACP asks of a client that cancels the turn.
"""

from __future__ import annotations

import asyncio
import os
import sys
import termios
import tty
from typing import Any, Literal

from acp_server.cli.run.printer import Printer
from acp_server.wire.jsonrpc import Params

Policy = Literal["yes", "ask", "refuse"]
Outcome = dict[str, Any]

# The keys a user answers with, the option kinds each stands for (in order of preference).
KEYS: dict[str, tuple[str, ...]] = {
    "y": ("allow_once", "allow_always"),
    "a": ("allow_always",),
    "n": ("reject_once", "reject_always"),
}
LABELS = {"y": "yes, this once", "a": "always", "n": "no"}


def _label(key: str, options: list[dict[str, Any]]) -> str:
    """What answering `key` does; for "always", the scope the server offers to remember."""
    if key != "a":
        return LABELS[key]
    scope = next((o.get("name") for o in options if o.get("kind") == "allow_always"), None)
    return f"{LABELS[key]} ({scope})" if scope else LABELS[key]


def choose_policy(yes: bool, stdin_is_terminal: bool) -> Policy:
    if yes:
        return "yes"
    return "ask" if stdin_is_terminal else "refuse"


def option_for(options: list[dict[str, Any]], kinds: tuple[str, ...]) -> str | None:
    """The id of the first offered option of one of `kinds` (by preference), None if none."""
    for kind in kinds:
        for option in options:
            if option.get("kind") == kind and option.get("optionId"):
                return str(option["optionId"])
    return None


def selected(option_id: str | None) -> Outcome:
    if option_id is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class Permissions:
    """Answers permission requests by the policy; asks on the terminal under "ask"."""

    def __init__(self, policy: Policy, printer: Printer, fd: int | None = None) -> None:
        self.policy = policy
        self.printer = printer
        self.err = printer.err
        self.fd = sys.stdin.fileno() if fd is None and policy == "ask" else fd
        self.waiting: set[asyncio.Future[str | None]] = set()
        self.cancelled = False

    async def answer(self, params: Params) -> Outcome:
        call = params.get("toolCall") or {}
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        self.printer.interject()
        title = self.printer.tools.title(call)
        if self.policy == "yes":
            self._say(f"[permission] allowed {title} (--yes)")
            return selected(option_for(options, KEYS["y"]))
        if self.policy == "refuse":
            self._say(
                f"\n[permission] refused {title}: stdin is not a terminal, so `acp-server run` "
                "cannot ask you. Pass --yes to allow every call, or --mode accept_edits "
                "(edits allowed) or --mode bypass (everything allowed)."
            )
            return selected(option_for(options, KEYS["n"]))
        self.printer.tools.details(call)
        return await self._ask(title, options)

    async def _ask(self, title: str, options: list[dict[str, Any]]) -> Outcome:
        offered = {key: option_for(options, kinds) for key, kinds in KEYS.items()}
        keys = [key for key in ("y", "a", "n") if offered[key] is not None]
        choices = " / ".join(f"[{key}] {_label(key, options)}" for key in keys)
        single = os.isatty(self._fd())
        how = "press" if single else "type"
        hint = f"{how} {', '.join(keys[:-1])} or {keys[-1]}" + ("" if single else " and Enter")
        while not self.cancelled:
            self.err.write(f"\n[permission] Allow {title}?\n  {choices} ({hint}): ")
            self.err.flush()
            line = await (self._read_key() if single else self._read_line())
            if line is None:  # end of input (Ctrl-D) or Ctrl-C: nobody said yes
                break
            key = line.strip().lower()[:1]
            if single:
                self._say(key)  # the key is not echoed: say what was answered
            if key in keys:
                return selected(offered[key])
            self._say(f"  Please answer {', '.join(keys[:-1])} or {keys[-1]}.")
        if self.cancelled:
            return selected(None)
        return selected(offered["n"])

    def _fd(self) -> int:
        assert self.fd is not None
        return self.fd

    async def _read_key(self) -> str | None:
        """One key pressed on the terminal, without Enter (what else arrived with it, such as
        the rest of a pasted word and its newline, is dropped); None at the end of input or
        when the turn is cancelled. Ctrl-C still interrupts: only line editing and echo are
        off while waiting."""
        fd = self._fd()
        saved = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd, termios.TCSANOW)
            while True:
                typed = await self._read_line()
                if typed is None or typed.strip():
                    return typed
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    async def _read_line(self) -> str | None:
        """One line typed on the terminal; None at its end or when the turn is cancelled."""
        return await read_line(self._fd(), self.waiting)

    def cancel(self) -> None:
        """The turn is being cancelled: stop asking; waiting questions answer `cancelled`."""
        self.cancelled = True
        for line in self.waiting:
            if not line.done():
                line.set_result(None)

    def _say(self, text: str) -> None:
        print(text, file=self.err, flush=True)


async def read_line(fd: int, waiting: set[asyncio.Future[str | None]]) -> str | None:
    """One line typed at terminal `fd`; None at its end, or when a cancel resolves the future
    this puts in `waiting` meanwhile (`Permissions.cancel`)."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str | None] = loop.create_future()

    def readable() -> None:
        data = os.read(fd, 4096)
        if not line.done():
            line.set_result(data.decode(errors="replace") if data else None)

    loop.add_reader(fd, readable)
    waiting.add(line)
    try:
        return await line
    finally:
        waiting.discard(line)
        loop.remove_reader(fd)
