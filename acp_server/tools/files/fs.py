"""File tools: read_file, write_file, list_directory (edit_file lives in `edit.py`).

Reads and writes go through the editor when it advertises `fs` (so unsaved buffers are what
the model sees and edits land in open buffers), and to the local disk otherwise. A write asks
permission with the diff as the preview *before* it touches the file.

Links: a path is resolved once (`ctx.target`: every link and `..`), the permission is asked
for where it leads (a request for a link says so in its title), and the file is then opened at
exactly that place with no link followed (`confine.files`), so a link swapped in after the
check by a command running meanwhile makes the call fail instead of leading elsewhere. A link
inside the project to a file outside asks like the file itself would. Listings (here and in
`glob`) show such links with where they lead and that reading them asks first. Reads refuse
FIFOs, devices and sockets without waiting, and files over MAX_TEXT_BYTES before reading.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from acp_server.confine import files
from acp_server.permissions import Permit, inside_roots
from acp_server.tools.base import (
    MAX_TEXT_BYTES,
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    arg_path,
    clip,
    diff_content,
    failing,
    for_editor,
    opened,
    shown_path,
    text_content,
    text_of,
)
from acp_server.tools.files.image import image_type_of, read_image
from acp_server.tools.search.ignore import EVERYTHING, NEVER, Rules, Scope

READ_DEFAULT_LINES = 2000
READ_MAX_CHARS = 100_000
SHOW_MAX_CHARS = 8_000
LIST_MAX_ENTRIES = 500


def _present_read(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    path = arg_path(args, ctx)
    if path is None:
        return Presentation("Read a file")
    line = args.get("line") if isinstance(args.get("line"), int) else None
    where = f" (from line {line})" if line else ""
    location: dict[str, Any] = {"path": str(path)}
    if line:
        location["line"] = line
    return Presentation(f"Read {shown_path(path, ctx)}{where}", [location])


async def _read_file(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    target = ctx.target(args["path"])
    line: int | None = args.get("line")
    limit: int | None = args.get("limit")
    await ctx.permit(Permit(paths=(target.shown,), through_link=target.through_link))
    shown = shown_path(target.shown, ctx)
    got = await asyncio.to_thread(_local_read, target, ctx.client.can_read, shown)
    if isinstance(got, ToolOutcome):  # a picture: the model looks at it (see `image`)
        return got
    wanted = limit or READ_DEFAULT_LINES
    if got is None:
        text = await ctx.client.read_text_file(str(target.shown), line, wanted)
        total = None
    else:
        lines = got.splitlines(keepends=True)
        total = len(lines)
        start = (line or 1) - 1
        text = "".join(lines[start : start + wanted])
    return _read_outcome(target.shown, text, line, limit, wanted, total)


def _local_read(target: files.Target, editor_reads: bool, shown: str) -> ToolOutcome | str | None:
    """What read_file takes from the disk, in a thread: one descriptor, opened without
    following a link and never blocking, for the image sniff and the read. An image's
    outcome; else the text, or None when the editor is to read it (checked for it first: a
    file only the editor has, an unsaved new buffer, is the editor's to answer)."""
    try:
        with opened(target.real) as file:
            mime = image_type_of(file.head(16))
            if mime is not None:
                return read_image(file, mime, shown, target.shown)
            if editor_reads:
                for_editor(target, file)
                return None
            data: bytes = failing(file.read, MAX_TEXT_BYTES, "a file read_file reads")
    except ToolFailure as exc:
        if not (editor_reads and isinstance(exc.__cause__, files.Missing)):
            raise
        failing(files.same_place, target.shown, target.real)
        return None
    return text_of(target.real, data)


def _read_outcome(
    path: Path, text: str, line: int | None, limit: int | None, wanted: int, total: int | None
) -> ToolOutcome:
    body = clip(text, READ_MAX_CHARS, "file")
    count = len(text.splitlines())
    header = ""
    cut = count >= wanted if total is None else total > (line or 1) - 1 + count
    if line or limit or cut:
        first = line or 1
        of_total = f" of {total}" if total is not None else ""
        more = f"; more lines follow, read on with line={first + count}" if cut else ""
        header = f"[{path}: lines {first}-{first + count - 1}{of_total}{more}]\n"
    if not text:
        body = "(empty file)" if not line else "(no lines at or after that line)"
    return ToolOutcome(
        header + body,
        content=[text_content(clip(text, SHOW_MAX_CHARS, "file") or body)],
    )


READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a text file, or look at an image (PNG, JPEG, GIF, WebP). `path` is absolute or "
        "relative to the working directory. Optionally `line` (1-based first line) and `limit` "
        "(number of lines) read part of a long file; by default up to "
        f"{READ_DEFAULT_LINES} lines are returned."
    ),
    kind="read",
    effect="read",
    present=_present_read,
    run=_read_file,
)


# -- line endings (shared with edit.py) ------------------------------------------------------


def uses_crlf(text: str) -> bool:
    """True when most line breaks in `text` are CRLF."""
    crlf = text.count("\r\n")
    return crlf > 0 and crlf >= text.count("\n") - crlf


def to_crlf(text: str) -> str:
    """`text` with every line break written as CRLF."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def line_count(text: str) -> int:
    return len(text.splitlines())


# -- write_file ------------------------------------------------------------------------------


def _present_write(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    path = arg_path(args, ctx)
    if path is None:
        return Presentation("Write a file")
    return Presentation(f"Write {shown_path(path, ctx)}", [{"path": str(path)}])


async def current_text(target: files.Target, ctx: ToolContext) -> str | None:
    """The file's text now, or None when there is no file at `target` yet."""
    info = failing(files.exists, target.real)
    if info is None:
        return None
    if files.kind_of(info) == "a directory":
        raise ToolFailure(f"{target.shown} is a directory, not a file.")
    return await ctx.read_text(target)


async def _write_file(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    target = ctx.target(args["path"])
    new: str = args["content"]
    await ctx.permit(
        Permit(paths=(target.shown,), effect="read", through_link=target.through_link)
    )  # outside: ask first
    old = await current_text(target, ctx)
    if old is not None and uses_crlf(old) and "\r" not in new:
        new = to_crlf(new)  # keep a CRLF file CRLF: a model writes "\n"
    diff = diff_content(target.shown, old, new)
    await ctx.permit(
        Permit(paths=(target.shown,), preview=[diff], through_link=target.through_link)
    )
    await ctx.write_text(target, new)
    shown, lines = shown_path(target.shown, ctx), line_count(new)
    text = f"Created {shown} ({lines} lines)" if old is None else f"Wrote {lines} lines to {shown}"
    return ToolOutcome(text, content=[diff])


WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create a file, or replace a file's whole content. `path` is absolute or relative to "
        "the working directory; missing parent directories are created. Prefer edit_file for "
        "changing part of an existing file. A file with CRLF line endings keeps them."
    ),
    kind="edit",
    effect="edit",
    present=_present_write,
    run=_write_file,
)


# -- list_directory --------------------------------------------------------------------------


def _present_list(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    path = arg_path(args, ctx) or ctx.cwd
    return Presentation(f"List {shown_path(path, ctx).rstrip('/')}/", [{"path": str(path)}])


def link_note(path: Path, roots: tuple[Path, ...]) -> str:
    """What a listing adds after a symlink that leads out of the project or nowhere ("" for
    anything else), so the model knows before it tries to read it."""
    if not path.is_symlink():
        return ""
    if not path.exists():  # follows the link: false for a dangling link and for a loop
        return f" -> {os.path.realpath(path)} (broken link)"
    if not inside_roots(path, roots):
        return f" -> {os.path.realpath(path)} (outside the project; reading it asks the user)"
    return ""


def list_entries(
    path: Path, roots: tuple[Path, ...] = (), scope: Scope = EVERYTHING
) -> tuple[list[str], int]:
    """Names in a directory, sorted, directories marked with a trailing slash and links out of
    `roots` with where they lead; and how many `scope` left out (hidden, ignored)."""
    try:
        with os.scandir(path) as it:
            names = sorted((e.name, _is_dir(e)) for e in it if e.name not in NEVER)
    except FileNotFoundError as exc:
        raise ToolFailure(f"Directory not found: {path}") from exc
    except NotADirectoryError as exc:
        raise ToolFailure(f"{path} is a file, not a directory; use read_file.") from exc
    except OSError as exc:
        raise ToolFailure(f"Cannot list {path}: {exc.strerror or exc}") from exc
    rules = Rules(path, scope)
    kept = [(name, is_dir) for name, is_dir in names if not rules.skips(path / name, is_dir)]
    shown = [name + ("/" if d else "") + link_note(path / name, roots) for name, d in kept]
    return shown, len(names) - len(kept)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


async def _list_directory(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    path = arg_path(args, ctx) or ctx.cwd
    await ctx.permit(Permit(paths=(path,)))
    scope = Scope(bool(args.get("include_hidden")), bool(args.get("include_ignored")))
    entries, left_out = await asyncio.to_thread(list_entries, path, ctx.roots, scope)
    shown = entries[:LIST_MAX_ENTRIES]
    if len(entries) > len(shown):
        shown.append(f"[… {len(entries) - len(shown)} more entries not shown]")
    if left_out:
        shown.append(
            f"[{left_out} hidden or ignored entries not shown: include_hidden / include_ignored "
            "show them.]"
        )
    text = "\n".join(shown) if shown else "(empty directory)"
    return ToolOutcome(
        clip(text, READ_MAX_CHARS, "listing"),
        content=[text_content(clip(text, SHOW_MAX_CHARS, "listing"))],
    )


LIST_DIRECTORY = Tool(
    name="list_directory",
    description=(
        "List the entries of a directory (default: the working directory), sorted by name; "
        "directories end with '/'; a link that leads outside the project is shown with its "
        "target. Hidden and .gitignored entries are counted, not shown, unless include_hidden "
        "/ include_ignored. Not recursive: use glob to find files by pattern. "
        f"At most {LIST_MAX_ENTRIES} entries are shown."
    ),
    kind="read",
    effect="read",
    present=_present_list,
    run=_list_directory,
)
