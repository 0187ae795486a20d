"""edit_file: exact-text replacements in one file, all or nothing.

Each edit names text that must occur exactly once (or sets `replace_all`), so a model working
from a stale view of the file fails loudly instead of changing the wrong place. Every edit is
checked before anything is asked or written: a failed edit means no permission request and an
untouched file, and the message says which edit failed and how to fix the call. CRLF files
stay CRLF even though models write "\\n". An old_text that is not in the file exactly but
occurs once with other quotes or spacing (`debug: true` for the JSON `"debug": true`) is
changed there, the file's own quotes and spacing kept, and the result says so (`loose`).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from acp_server.confine import files
from acp_server.permissions import Permit
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    arg_path,
    diff_content,
    failing,
    local_bytes,
    shown_path,
    text_of,
)
from acp_server.tools.files import loose
from acp_server.tools.files.fs import current_text, to_crlf, uses_crlf

EXACTNESS = (
    "old_text must match the file exactly, including whitespace, indentation and line breaks."
)
HINT_MAX_LINES = 8
HINT_LINE_CHARS = 200
FUZZY_MAX_LINES = 20_000  # closest-line search is quadratic-ish; skip it on huge files


def _present_edit(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    path = arg_path(args, ctx)
    if path is None:
        return Presentation("Edit a file")
    return Presentation(f"Edit {shown_path(path, ctx)}", [{"path": str(path)}])


async def _edit_file(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    target = ctx.target(args["path"])
    edits: list[dict[str, Any]] = args["edits"]
    await ctx.permit(
        Permit(paths=(target.shown,), effect="read", through_link=target.through_link)
    )  # outside: ask first
    old = await _existing_text(target, ctx)
    new, notes = apply_edits(old, edits)
    diff = diff_content(target.shown, old, new)
    await ctx.permit(
        Permit(paths=(target.shown,), preview=[diff], through_link=target.through_link)
    )
    await ctx.write_text(target, new)
    line = first_changed_line(old, new)
    count = f"{len(edits)} edit" + ("s" if len(edits) != 1 else "")
    text = f"Applied {count} to {shown_path(target.shown, ctx)} (first change at line {line})"
    if len(edits) == 1 and notes:  # one edit: what it changed, in the same sentence
        text += f": {notes[0][1]}"
    else:
        text += "." + "".join(f" Edit {number}: {change}" for number, change in notes)
    return ToolOutcome(text, content=[diff], locations=[{"path": str(target.shown), "line": line}])


async def _existing_text(target: files.Target, ctx: ToolContext) -> str:
    if ctx.client.can_read:
        text = await current_text(target, ctx)
        if text is None:
            raise ToolFailure(_missing(target))
        return text
    try:
        data = local_bytes(target.real)
    except ToolFailure as exc:
        if failing(files.exists, target.real) is None:
            raise ToolFailure(_missing(target)) from exc
        raise
    try:
        return text_of(target.real, data) if b"\0" in data[:8192] else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A lenient decode would replace the bad bytes; writing that back would corrupt it.
        raise ToolFailure(
            f"{target.shown} is not valid UTF-8 text, so edit_file cannot change it without "
            "corrupting it. Use a command (for example iconv or sed) instead."
        ) from exc


def _missing(target: files.Target) -> str:
    return f"File not found: {target.shown}. To create a new file, use write_file."


Notes = list[tuple[int, str]]  # (the edit's number, what it changed), for edits made loosely


def apply_edits(text: str, edits: list[dict[str, Any]]) -> tuple[str, Notes]:
    """`text` with every edit applied in order, and a note for each edit whose old_text
    matched only with other quotes or spacing (`loose`); a ToolFailure names the first edit
    that cannot be applied."""
    crlf = uses_crlf(text)
    notes: Notes = []
    for number, edit in enumerate(edits, 1):
        text = _apply_one(text, edit, number, crlf, notes)
    return text, notes


def _apply_one(text: str, edit: dict[str, Any], number: int, crlf: bool, notes: Notes) -> str:
    old, new = str(edit["old_text"]), str(edit["new_text"])
    if not old:
        raise ToolFailure(
            f"Edit {number}: old_text is empty. Give the exact text to replace; to create a "
            "file or replace all of its content, use write_file."
        )
    if crlf:
        old, new = _crlf_pair(text, old, new)
    found = text.count(old)
    if found == 0 and not edit.get("replace_all"):
        return _loosely(text, old, new, number, notes)
    if found == 0:
        raise ToolFailure(_not_found(text, old, number))
    if found > 1 and not edit.get("replace_all"):
        raise ToolFailure(
            f"Edit {number}: old_text occurs {found} times in the file, so it is not clear "
            "which one to change. Add surrounding lines to old_text so it matches exactly one "
            "place, or set replace_all to true to change every occurrence."
        )
    if old == new:
        raise ToolFailure(f"Edit {number}: old_text and new_text are the same; it changes nothing.")
    every = bool(edit.get("replace_all"))
    if not new and "\n" not in old:
        # Deleting a whole line takes its line break too: a model asked to remove a line
        # gives the line without it, and a blank line left in its place is not what it meant.
        whole_line = re.compile(r"(?m)^" + re.escape(old) + r"\r?\n")
        text = whole_line.sub("", text, count=0 if every else 1)
        if not every and old not in text:
            return text
    return text.replace(old, new) if every else text.replace(old, new, 1)


def _loosely(text: str, old: str, new: str, number: int, notes: Notes) -> str:
    """The edit made where `old` occurs once with other quotes or spacing (the file's own
    kept where the model changed nothing), with a note saying so; else the not-found failure."""
    places = loose.spans(text, old)
    if len(places) != 1:
        raise ToolFailure(_not_found(text, old, number, places[:1]))
    start, end = places[0]
    found = text[start:end]
    changed = loose.carried(old, new, found)
    if changed is None:
        raise ToolFailure(_not_found(text, old, number, places))
    line = text.count("\n", 0, start) + 1
    if changed == found:
        raise ToolFailure(
            f"Edit {number}: the file already has this, with its own quotes or spacing, at "
            f"line {line}: {_cut(found)}. It changes nothing."
        )
    notes.append(
        (number, f"{_cut(found)} → {_cut(changed)}, the file's own quotes and spacing kept.")
    )  # said plainly: a small model told its old_text "was not in the file" apologised
    return text[:start] + changed + text[end:]


def _crlf_pair(text: str, old: str, new: str) -> tuple[str, str]:
    """The edit as it applies to a CRLF file: written with CRLF, unless only the text as
    given occurs (a file with mixed line endings)."""
    converted = to_crlf(old)
    if converted in text or old not in text:
        return converted, to_crlf(new)
    return old, new


def _not_found(
    text: str, old: str, number: int, loosely: list[tuple[int, int]] | None = None
) -> str:
    message = f"Edit {number}: old_text was not found in the file. {EXACTNESS}"
    if number > 1:
        message += " Edits apply in order, so earlier edits in this call may have changed it."
    return f"{message}\n{_hint(text, old, loosely)}"


def _hint(text: str, old: str, loosely: list[tuple[int, int]] | None = None) -> str:
    """Where the model may have meant: the file's lines that start like `old`, the text that
    differs from it only in quotes or spacing (`loosely`: those places, when already found),
    or the closest single line."""
    wanted = next((line.strip() for line in old.splitlines() if line.strip()), "")
    lines = text.splitlines()
    if not wanted:
        return "old_text holds only whitespace; read the file to see its current content."
    starts = [i for i, line in enumerate(lines) if line.strip() == wanted]
    if starts:
        first = starts[0]
        size = min(max(len(old.splitlines()), 1), HINT_MAX_LINES)
        shown = "\n".join(_cut(line) for line in lines[first : first + size])
        return (
            f"Its first line matches line {first + 1} (ignoring indentation); the file has "
            f"there:\n{shown}"
        )
    places = loose.spans(text, old, limit=1) if loosely is None else loosely
    if places:
        start, end = places[0]
        line = text.count("\n", 0, start) + 1
        shown = "\n".join(_cut(part) for part in text[start:end].splitlines()[:HINT_MAX_LINES])
        return (
            f"The file has it with other quotes or spacing, at line {line}:\n{shown}\n"
            "Use that text exactly as old_text."
        )
    if len(lines) <= FUZZY_MAX_LINES:
        stripped = [line.strip() for line in lines]
        close = difflib.get_close_matches(wanted, stripped, n=1, cutoff=0.6)
        if close:
            at = stripped.index(close[0])
            return f"The closest line is line {at + 1}: {_cut(lines[at])}"
    return "Nothing similar is in the file; read the file to see its current content."


def _cut(line: str) -> str:
    return line if len(line) <= HINT_LINE_CHARS else line[:HINT_LINE_CHARS] + "…"


def first_changed_line(old: str, new: str) -> int:
    """The 1-based line where `new` first differs from `old`."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for number, (a, b) in enumerate(zip(old_lines, new_lines, strict=False), 1):
        if a != b:
            return number
    return max(1, min(len(old_lines) + 1, len(new_lines)))


EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Change an existing file by exact text replacement. Each edit replaces `old_text` "
        "with `new_text`; `old_text` must match the file exactly (whitespace and indentation "
        "included) and occur exactly once, unless `replace_all` is true. Include enough "
        "surrounding lines to make it unique. Edits apply in order, all or nothing: if one "
        "fails, the file is left unchanged. Read the file first. Use write_file to create files."
    ),
    kind="edit",
    effect="edit",
    present=_present_edit,
    run=_edit_file,
)
