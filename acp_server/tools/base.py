"""The tool seam: what a tool is, the context it runs in, and what it returns.

A tool is a plain async function plus a description. It says what it is about to touch by
calling `ctx.permit(...)` (paths, a command, a preview such as a diff) *before* touching it;
the toolbox decides from the session's mode and remembered rules whether that runs, asks the
user, or is refused. A refusal or any failure the model should hear about is a `ToolFailure`;
the toolbox turns it into the call's one result, and so is an error the editor answered
(`ClientRequestFailed`). Tools never see the wire. The small helpers
tools share live here too: local file I/O, clipping, and cleanup that survives a cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from acp_server import schemas
from acp_server.confine import files
from acp_server.confine.sandbox import Sandbox
from acp_server.editor_api import EditorApi
from acp_server.messages import ImagePart
from acp_server.permissions import Effect, Permit
from acp_server.tools.commands.jobs import Jobs
from acp_server.updates import text_content as text_content  # re-exported for the tools

log = logging.getLogger(__name__)

CLEANUP_SECONDS = 5.0  # bound on one cleanup step (kill, release, reap), also while cancelled

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
Emit = Callable[[dict[str, Any]], None]


class ToolFailure(Exception):
    """The call failed; the message is written for the model (and shown to the user)."""


class CancelledByUser(Exception):
    """The user answered a permission request with "cancel": not a refusal of this call but
    the end of the turn, which then stops as `cancelled` like after `session/cancel`."""


@dataclass(frozen=True)
class ToolOutcome:
    """What a call produced: text for the model, and what the editor should show."""

    text: str
    ok: bool = True
    # ACP ToolCallContent items for the final tool_call_update (default: the text).
    content: list[dict[str, Any]] | None = None
    raw_output: Any = None
    # Where the call ended up (e.g. the first changed line), for follow-along editors.
    locations: list[dict[str, Any]] | None = None
    # Images the model gets with the text (read_file on a picture); a model that reads none
    # gets a note in their place (backends.images).
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True)
class Presentation:
    """How a call is introduced to the editor (`tool_call`)."""

    title: str
    locations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ToolContext:
    """Everything a running tool may use."""

    call_id: str
    cwd: Path
    roots: tuple[Path, ...]
    client: EditorApi
    emit: Emit
    permit: Callable[[Permit], Awaitable[None]]
    # Set by a tool that created a client terminal, so cancellation can release it.
    terminals: list[str] = field(default_factory=list)
    # The session's background commands (run_command with `background`).
    jobs: Jobs = field(default_factory=Jobs)
    # Where the session's commands run confined (run_command); off: as the user.
    sandbox: Sandbox = field(default_factory=lambda: Sandbox("off", ()))

    def resolve(self, path: str) -> Path:
        """An absolute, normalized path: absolute as given, or relative to the session cwd.
        Symlinks are not followed here; the permission check does that."""
        expanded = os.path.expanduser(path)
        if os.path.isabs(expanded):
            return Path(os.path.normpath(expanded))
        return Path(os.path.normpath(os.path.join(self.cwd, self._below_own_name(expanded))))

    def _below_own_name(self, relative: str) -> str:
        """`relative` without a first part that names the cwd itself, when the cwd holds
        nothing by that name: models shown the project's path (…/shop) often write `shop/a.py`
        for `a.py`, as editors that prefix paths with the project's name do. A folder or file
        that is really called so keeps its meaning."""
        head, _, rest = os.path.normpath(relative).partition(os.sep)
        if head != self.cwd.name or os.path.lexists(self.cwd / head):
            return relative
        return rest or os.curdir

    def target(self, path: str) -> files.Target:
        """Where `path` leads, resolved once. The permission is asked for `shown` and the file
        is then opened at `real` with no link followed, so a link swapped in after the check
        (by a command running meanwhile) makes the call fail instead of leading elsewhere."""
        try:
            return files.target(self.resolve(path), self.roots)
        except files.Refused as exc:
            raise ToolFailure(str(exc)) from exc

    async def read_text(self, target: files.Target) -> str:
        """File text as the editor sees it (unsaved buffers included) when the client can
        read files; from disk otherwise."""
        if self.client.can_read:
            for_editor(target)
            return await self.client.read_text_file(str(target.shown), None, None)
        return read_local(target.real)

    async def write_text(self, target: files.Target, text: str) -> None:
        """Write through the editor when it can (it updates open buffers); to disk otherwise."""
        if self.client.can_write:
            failing(files.same_place, target.shown, target.real)
            await self.client.write_text_file(str(target.shown), text)
            return
        write_local(target.real, text)


MAX_TEXT_BYTES = 16 * 1024 * 1024  # the largest file read_file and edit_file read whole


def failing(step: Callable[..., Any], *args: Any) -> Any:
    """`step(*args)`, a refusal of `confine.files` turned into the call's failure."""
    try:
        return step(*args)
    except files.Refused as exc:
        raise ToolFailure(str(exc)) from exc


@contextlib.contextmanager
def opened(real: Path) -> Iterator[files.Opened]:
    """`real` opened for reading (no link followed, never blocking; a regular file only)."""
    try:
        with files.open_regular(real) as file:
            yield file
    except files.Refused as exc:
        raise ToolFailure(str(exc)) from exc


def for_editor(target: files.Target, file: files.Opened | None = None) -> None:
    """Before the editor reads `target` (it follows links and would block on a FIFO): the
    file must be a regular one of a size we read, still where it was checked. A link swapped
    in after this check, before the editor opens the file, is the window that remains."""
    if file is None:
        with opened(target.real) as now:
            return for_editor(target, now)
    if file.size > MAX_TEXT_BYTES:
        raise ToolFailure(files.too_large(target.real, file.size, MAX_TEXT_BYTES, "a file"))
    failing(files.same_place, target.shown, target.real)
    return None


def local_bytes(real: Path) -> bytes:
    """The file at `real` (links resolved when checked; none followed now), refused when it
    is not a regular file or larger than MAX_TEXT_BYTES."""
    with opened(real) as file:
        data: bytes = failing(file.read, MAX_TEXT_BYTES, "a file")
    return data


def text_of(real: Path, data: bytes) -> str:
    """A file's bytes as text; refused when they look binary."""
    if b"\0" in data[:8192]:
        raise ToolFailure(f"{real} looks like a binary file (it contains NUL bytes); not shown.")
    return data.decode("utf-8", errors="replace")


def read_local(real: Path) -> str:
    return text_of(real, local_bytes(real))


def write_local(real: Path, text: str) -> None:
    """Write atomically (a crash never leaves half a file), keeping the file's permissions,
    into the folder that was checked; `real` is where a link led when it was checked, so a
    link is written through to its target, and a link swapped in since is replaced."""
    failing(files.write_atomic, real, text.encode("utf-8"))


@dataclass(frozen=True)
class Tool:
    """A tool offered to the model. Its input schema is `input_schema` when given (an MCP
    server's tool, which checks its arguments itself), else `schemas/tools/<name>.json`."""

    name: str
    description: str
    kind: ToolKind
    effect: Effect
    present: Callable[[dict[str, Any], ToolContext], Presentation]
    run: Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]
    input_schema: dict[str, Any] | None = None

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of its arguments: `input_schema`, else `schemas/tools/<name>.json`."""
        if self.input_schema is not None:
            return self.input_schema
        return schemas.load(f"tools/{self.name}.json")


def shown_path(path: Path, ctx: ToolContext) -> str:
    """A path as a person reads it in a title: relative to the cwd when inside it."""
    try:
        rel = path.relative_to(ctx.cwd)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else str(path)


def arg_path(args: dict[str, Any], ctx: ToolContext, key: str = "path") -> Path | None:
    value = args.get(key)
    return ctx.resolve(value) if isinstance(value, str) and value else None


def diff_content(path: Path, old: str | None, new: str) -> dict[str, Any]:
    """An ACP diff item; `old` None means a new file (oldText omitted)."""
    item: dict[str, Any] = {"type": "diff", "path": str(path), "newText": new}
    if old is not None:
        item["oldText"] = old
    return item


def clip(text: str, limit: int, what: str = "output") -> str:
    """`text` cut to `limit` characters on a line boundary, saying what was left out."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    cut = cut if cut > limit // 2 else limit
    dropped = text[cut:].count("\n") + 1
    return text[:cut] + f"\n[… {what} truncated: about {dropped} more lines not shown]"


def clip_end(text: str, limit: int) -> str:
    """The last `limit` characters of `text`, starting on a line boundary when one is near.
    Adds no note: the caller says that the beginning was left out."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    newline = text.find("\n", start, start + limit // 2)
    return text[newline + 1 :] if newline != -1 else text[start:]


# Cleanup steps still running after their caller gave up waiting; kept so they are not
# garbage-collected mid-flight.
_background: set[asyncio.Future[Any]] = set()


async def _through_cancels(task: asyncio.Future[Any], seconds: float) -> bool:
    """Wait for `task` (at most `seconds`), through any cancel of the caller meanwhile: a
    second cancel (`session/cancel` and `$/cancel_request` of one prompt) must not cut a
    cleanup short. Such a cancel is raised once the wait is over. True if it finished."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    cancelled = False
    while not task.done() and loop.time() < deadline:
        try:
            await asyncio.wait({task}, timeout=deadline - loop.time())
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.done()


def keep(task: asyncio.Future[Any]) -> None:
    """Hold a cleanup task that nobody awaits until it is done (asyncio keeps only weak
    references to tasks)."""
    _background.add(task)
    task.add_done_callback(_background.discard)


async def settle(step: Awaitable[Any], what: str) -> bool:
    """Let a cleanup step finish (within CLEANUP_SECONDS) even while the caller is being
    cancelled, again or for the first time: the step itself is never cancelled, and a cancel
    that arrives meanwhile is raised after it. A failure is logged, not raised. False if the
    step did not finish in time."""
    task = asyncio.ensure_future(step)
    keep(task)
    if not await _through_cancels(task, CLEANUP_SECONDS):
        log.warning("%s did not finish within %g s", what, CLEANUP_SECONDS)
        return False
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s failed: %s", what, task.exception())
    return True
