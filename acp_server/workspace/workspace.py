"""The session's workspace: the part of the system prompt that says where the agent works.

`Workspace.start()` (after `session/new` is answered) starts the git probe in the background;
`await prompt_part(tell)` gives the project instructions and the environment block, re-read
when they changed, and tells the user once which instruction files were read (and later, each
newly read one). `touched(call)` notes the folders a tool call worked in: their own
instruction files apply from the next request on (`current()` gives the part anew).
`instruct` puts it all into a turn: its system prompt, and its tools watched.

The system prompt is byte-stable for a session (a provider's prompt cache serves a prefix that
only grows): `system_for` makes it once, and again only when what it is made of changes (the
model's window, the client's prompt, the MCP note). What changes meanwhile (git's status, an
instruction file found or changed, the date) is told as a note appended to the conversation
(`news`, put into `Turn.notes`), never by rewriting the system prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server.messages import Message, ToolCall, is_note
from acp_server.workspace import environment, instructions

if TYPE_CHECKING:
    from acp_server.agent.loop import ToolRunner, Turn

log = logging.getLogger(__name__)

Tell = Callable[[str, str], None]
PATH_ARGUMENTS = ("path", "file_path", "directory", "cwd")
TURN_WAIT = 0.3  # seconds a later turn waits for git before it uses the last state
NEW_GIT = "The project's git state changed; it is now:\n"
NEW_DATE = "The date changed; today is "


def _result(probe: asyncio.Task[environment.GitState], cwd: Path) -> environment.GitState:
    """The probe's state; a failure is logged and said as a problem (never a failed turn)."""
    if probe.cancelled() or probe.exception() is not None:
        log.warning("git status failed in %s", cwd, exc_info=probe.exception())
        return environment.GitState(problem="git status failed")
    return probe.result()


def user_folder(config_option: str | None) -> Path:
    """Where the user's own instructions file is: beside the configuration file in use."""
    from acp_server.config.file import config_path

    return config_path(config_option, os.environ)[0].parent


class Workspace:
    """Instructions and environment for one session's roots."""

    def __init__(self, cwd: Path, extra: tuple[Path, ...], user_dir: Path | None) -> None:
        self.cwd = cwd
        self.extra = extra
        self.user_dir = user_dir
        self.root = instructions.project_root(cwd)
        self.repo = self.root if instructions.has_git(self.root) else None
        self._reader = instructions.Reader((self.root, cwd, *extra))
        self._nested: list[Path] = []  # folders worked in, below the cwd or beside it
        self._paths_seen: set[str] = set()  # path arguments already looked at (`_folders_of`)
        self._shown: set[Path] = set()  # instruction files the user was told of
        self._skips_told: set[Path] = set()  # instruction files not read, the user told why
        self._probe: asyncio.Task[environment.GitState] | None = None
        self._git: environment.GitState | None = None
        self.total = instructions.TOTAL_CHARS  # what the files may take (`fit_to`)
        self._fixed: tuple[tuple[str, str, int], str] | None = None  # `system_for`'s, and why
        self._given: dict[Path, tuple[int, str]] = {}  # files the model was given: size, text
        self._told: tuple[environment.GitState | None, str] = (None, "")  # git, date told
        self._start: tuple[dict[Path, tuple[int, str]], tuple[environment.GitState | None, str]]
        self._start = ({}, (None, ""))  # what the system prompt gave: `_given` and `_told`
        self._noted: list[str] = []  # the notes given since (`news`)

    def fit_to(self, window: int | None) -> None:
        """Bound the instruction files to a share of a window of `window` tokens."""
        self.total = instructions.total_for(window)

    def start(self) -> None:
        """Ask git in the background (needs a running loop; a no-op outside a repository)."""
        if self.repo is not None and self._probe is None:
            self._probe = self._ask_git()

    def _ask_git(self) -> asyncio.Task[environment.GitState]:
        return asyncio.create_task(environment.git_state(self.cwd), name="git-status")

    async def prompt_part(self, tell: Tell | None) -> str:
        """The instructions and the environment for this turn's requests (git asked again)."""
        await self._refresh_git()
        part = self.current()
        if tell is not None:
            self.tell_news(tell)
        return part

    def current(self) -> str:
        """The part with the instruction files as they are now and the last git state."""
        found = self.found()
        sections = [
            instructions.render(found, self.root),
            environment.block(self.repo, self._git),
        ]
        return "".join(f"\n\n{s}" for s in sections if s)

    def system_for(self, base: str, note: str) -> str:
        """The session's system prompt: `base`, the instructions and the environment, `note`;
        made anew only when `base`, `note` or the instructions' share of the window changed
        (then what the model was told starts over from it), else the same text as before."""
        key = (base, note, self.total)
        if self._fixed is None or self._fixed[0] != key:
            found = self.found()
            self._given = {f.path: (f.size, f.text) for f in found}
            self._told = (self._git, environment.today())
            self._start, self._noted = (dict(self._given), self._told), []
            sections = [instructions.render(found, self.root), self.environment()]
            text = base + "".join(f"\n\n{s}" for s in sections if s) + note
            self._fixed = (key, text)
        return self._fixed[1]

    @property
    def system(self) -> str:
        """The system prompt last made by `system_for` ("" before the first turn)."""
        return self._fixed[1] if self._fixed is not None else ""

    def environment(self) -> str:
        return environment.block(self.repo, self._git)

    def news(self) -> str:
        """What changed since the model was last told (an instruction file found or changed,
        git's status, the date), as a note for the conversation; "" when nothing did."""
        parts: list[str] = []
        files = [f for f in self.found() if self._changed(f)]
        if files:
            self._given.update({f.path: (f.size, f.text) for f in files})
            parts.append(instructions.render(files, self.root))
        git, date = self._told
        if self._git != git and self._git is not None:
            parts.append(NEW_GIT + environment.describe_git(self.repo, self._git))
        if environment.today() != date:
            parts.append(NEW_DATE + environment.today())
        self._told = (self._git, environment.today())
        if parts:
            self._noted.append("\n\n".join(parts))
        return "\n\n".join(parts)

    def recall(self, history: Iterable[Message]) -> None:
        """A note given is gone from `history` (compacted or cleared): what the model knows is
        the system prompt's again, so the next `news` tells anew what differs from it."""
        if not self._noted:
            return
        kept = "".join(m.text for m in history if is_note(m))
        if any(note not in kept for note in self._noted):
            given, self._told = self._start
            self._given, self._noted = dict(given), []

    def _changed(self, found: instructions.Found) -> bool:
        """A file the model was not given, or given other text of (a file clipped shorter or
        longer for the room others take is the same file)."""
        given = self._given.get(found.path)
        if given is None:
            return True
        size, text = given
        return size != found.size or not (
            text.startswith(found.text) or found.text.startswith(text)
        )

    def found(self) -> list[instructions.Found]:
        """The instruction files that apply now, in the order the model is given them."""
        return instructions.collect(self._reader, self._sources(), self.total)

    def touched(self, call: ToolCall) -> bool:
        """Note the folders `call` worked in; True when one of them brought new instructions.
        A call in folders already noted brings none, and costs no look at the disk (it was
        ~half of the agent's own time per round of a turn of reads)."""
        new: list[Path] = []
        for folder in self._folders_of(call):
            if folder not in self._nested and folder not in new and self._inside(folder):
                new.append(folder)
        if not new:
            return False
        before = {f.path for f in self.found()}
        self._nested += new
        return any(f.path not in before for f in self.found())

    def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()

    def _sources(self) -> Iterator[tuple[str, Path]]:
        if self.user_dir is not None:
            yield "user", self.user_dir
        for folder in instructions.chain(self.root, self.cwd):
            yield "project", folder
        nested: list[Path] = []
        for folder in self._nested:
            base = next((r for r in self._bases() if folder.is_relative_to(r)), folder)
            nested += [f for f in instructions.chain(base, folder) if f not in nested]
        for folder in sorted(nested, key=lambda f: len(f.parts)):
            yield "nested", folder

    def _bases(self) -> tuple[Path, ...]:
        """Where nested files are looked for: the project root, then the other roots."""
        return (self.root, *self.extra)

    def _inside(self, folder: Path) -> bool:
        return any(folder.is_relative_to(r) for r in self._bases())

    def _folders_of(self, call: ToolCall) -> Iterator[Path]:
        """The folders of the call's path arguments not seen before (a path given again, as a
        turn of reads and edits does, is not resolved again: that was most of a round's own
        time)."""
        for key in PATH_ARGUMENTS:
            value = call.arguments.get(key)
            if isinstance(value, str) and value and "\0" not in value:
                if value in self._paths_seen:
                    continue
                if len(self._paths_seen) >= 4096:
                    self._paths_seen.clear()
                self._paths_seen.add(value)
                path = Path(value).expanduser()
                path = path if path.is_absolute() else self.cwd / path
                with contextlib.suppress(OSError, RuntimeError):
                    path = path.resolve()
                    yield path if path.is_dir() else path.parent

    async def _refresh_git(self) -> None:
        """A fresh git state: the first turn waits for it (within git's timeout), a later one
        for at most TURN_WAIT, else keeps the last state and leaves git running for the next
        (a huge repository must not slow every prompt). A cancelled turn leaves it running."""
        if self.repo is None:
            return
        if self._probe is None:
            self._probe = self._ask_git()
        probe = self._probe
        if self._git is None:
            await asyncio.wait({probe})  # a cancel of the turn leaves git running
        elif not probe.done():
            await asyncio.wait({probe}, timeout=TURN_WAIT)
        if probe.done():
            self._probe = None
            self._git = _result(probe, self.cwd)

    def tell_news(self, tell: Tell) -> None:
        """Tell the user which instruction files were read that they were not told of yet."""
        found = self.found()
        for item in (f for f in found if f.skipped and f.path not in self._skips_told):
            self._skips_told.add(item.path)
            shown = instructions.shown_path(item.path, self.root)
            tell(
                f"Project instructions: {shown} was not read: {item.skipped.rstrip('.')}.",
                "warning",
            )
            log.warning("instruction file %s skipped: %s", item.path, item.skipped)
        new = [f for f in found if not f.skipped and f.path not in self._shown]
        if not new:
            return
        self._shown.update(f.path for f in new)
        names = ", ".join(instructions.shown_path(f.path, self.root) for f in new)
        again = "also " if len(self._shown) > len(new) else ""
        clipped = [f for f in new if f.clipped]
        note = " (clipped: too long to give in full)" if clipped else ""
        tell(f"Project instructions {again}read: {names}{note}.", "info")
        log.info("instruction files read: %s", names)


async def instruct(
    turn: Turn,
    tools: Callable[[], ToolRunner],
    where: Workspace,
    note: str,
    window: int | None,
) -> None:
    """Give the turn the session's system prompt (ours, then the project instructions, the
    environment and the MCP note: `Workspace.system_for`, the same text as the last turn's
    unless one of them changed) and a note of what changed since the last turn (git's status,
    the date, an instruction file); set its tools, watched: a nested instructions file found
    by a tool call is told in a note before the next request. `note` is the MCP servers' (they
    were waited for: their tools are among `tools`). The instructions take a share of the
    `window` at most. The user is told with `turn.voice` which files were read."""
    from acp_server.workspace.watch import Watched  # the tools' modules: at the first turn

    base, tell = turn.system, turn.voice.tell
    where.fit_to(window)
    await where.prompt_part(tell)
    turn.system = where.system_for(base, note)
    where.recall(turn.history)
    _note(turn, where)

    def found_more() -> None:
        _note(turn, where)
        where.tell_news(tell)

    turn.tools = Watched(tools(), where.touched, found_more)


def _note(turn: Turn, where: Workspace) -> None:
    news = where.news()
    if news:
        turn.notes.append(news)
