"""Search tools: glob (find files by name pattern) and grep (find lines by regex).

Both are pure Python, so they work where ripgrep is not installed. They walk the disk in a
worker thread so the event loop keeps serving the editor, prune the directories nobody means
to search (`.git`, `node_modules`, virtualenvs, bytecode caches) instead of filtering them
afterwards, and stop at the next file once the call is cancelled. Paths in their output are
relative to the session's working directory, so the model can pass them straight to
read_file or edit_file.

Links never lead a search out of the project unnoticed. Directory links are not followed (the
walk stays in the tree it was given), and the permission for the starting point is asked where
it really leads. grep does not read a linked file whose target lies outside both the project
and the directory being searched: it says how many it skipped and that read_file (which asks
the user, as for any read outside the project) can open them. glob lists such links with where
they lead, like list_directory.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_server.permissions import Permit, inside_roots
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    clip,
    text_content,
)
from acp_server.tools.fs import arg_path, link_note, shown_path
from acp_server.tools.walk import (
    find_matches,
    in_thread,
    pattern_regex,
    segment_regex,
    split_pattern,
    walk,
)

GLOB_MAX_SHOWN = 500
GREP_DEFAULT_RESULTS = 200
GREP_MAX_RESULTS = 2000
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024
GREP_LINE_CHARS = 300
BINARY_SNIFF_BYTES = 8192
MODEL_MAX_CHARS = 60_000
SHOW_MAX_CHARS = 8_000
MAX_LOCATIONS = 10
MAX_SKIPPED_NAMED = 5

# -- glob --------------------------------------------------------------------------------------


def _present_glob(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    pattern = args.get("pattern")
    title = f"Find {_short(pattern)}" if isinstance(pattern, str) and pattern else "Find files"
    path = arg_path(args, ctx)
    if path is None:
        return Presentation(title)
    return Presentation(f"{title} in {_shown_dir(path, ctx)}", [{"path": str(path)}])


async def _glob(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    base = arg_path(args, ctx) or ctx.cwd
    prefix, segments = split_pattern(str(args["pattern"]))
    root = ctx.resolve(os.path.join(base, prefix)) if prefix else base
    if not segments:
        raise ToolFailure("The pattern names no files; give one such as **/*.py.")
    await ctx.permit(Permit(paths=(root,)))
    if not root.is_dir():
        raise ToolFailure(f"Directory not found: {root}")
    found, total = await in_thread(lambda stop: find_matches(root, segments, stop))
    shown = await in_thread(lambda stop: _listed(root, found, ctx))
    return _glob_outcome(shown, total, str(args["pattern"]), root, ctx)


def _listed(root: Path, found: list[str], ctx: ToolContext) -> list[str]:
    """The first GLOB_MAX_SHOWN matches, by shown path; links out of the project say so."""
    shown = sorted((_shown_match(root, rel, ctx), rel) for rel in found)[:GLOB_MAX_SHOWN]
    return [text + link_note(root / rel.rstrip("/"), ctx.roots) for text, rel in shown]


def _shown_match(root: Path, rel: str, ctx: ToolContext) -> str:
    return shown_path(root / rel, ctx) + ("/" if rel.endswith("/") else "")


def _glob_outcome(
    shown: list[str], total: int, pattern: str, root: Path, ctx: ToolContext
) -> ToolOutcome:
    if not shown:
        text = f"No files match {pattern} under {_shown_dir(root, ctx)}."
        return ToolOutcome(text, content=[text_content(text)])
    lines = list(shown)
    if total > len(lines):
        lines.append(
            f"[{total} matches; only the first {len(lines)} (by path) are shown. "
            "Narrow the pattern or the path to see the rest.]"
        )
    text = "\n".join(lines)
    return ToolOutcome(
        clip(text, MODEL_MAX_CHARS, "matches"),
        content=[text_content(clip(text, SHOW_MAX_CHARS, "matches"))],
    )


GLOB = Tool(
    name="glob",
    description=(
        "Find files and directories by name pattern, e.g. `**/*.py` (any depth), `src/*.ts`, "
        "`**/test_*.{py,pyi}`. `path` is the directory to search from (default: the working "
        "directory). Returns matching paths sorted by path, relative to the working "
        f"directory (directories end with '/'); at most {GLOB_MAX_SHOWN}. Skips .git, "
        "node_modules, .venv and __pycache__; does not follow directory links, and shows "
        "where a link that leads outside the project points."
    ),
    kind="search",
    effect="read",
    present=_present_glob,
    run=_glob,
)


# -- grep --------------------------------------------------------------------------------------


@dataclass
class GrepResult:
    hits: list[tuple[Path, int, str]] = field(default_factory=list)
    cut: bool = False
    outside: list[Path] = field(default_factory=list)  # links out of the allowed places
    unreadable: int = 0  # files that could not be read: dangling links, loops, no permission


def _present_grep(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    pattern = args.get("pattern")
    title = f"Search for `{_short(pattern)}`" if isinstance(pattern, str) else "Search files"
    path = arg_path(args, ctx)
    if path is not None:
        title += f" in {_shown_dir(path, ctx)}"
    if isinstance(args.get("glob"), str) and args["glob"]:
        title += f" ({_short(args['glob'])})"
    return Presentation(title, [{"path": str(path)}] if path else [])


async def _grep(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    regex = _compile(str(args["pattern"]), bool(args.get("ignore_case")))
    base = arg_path(args, ctx) or ctx.cwd
    limit = min(max(int(args.get("max_results") or GREP_DEFAULT_RESULTS), 1), GREP_MAX_RESULTS)
    name_filter = _name_filter(args.get("glob"))
    await ctx.permit(Permit(paths=(base,)))
    if not base.exists():
        raise ToolFailure(f"Not found: {base}")
    allowed = (*ctx.roots, base)  # the project, and where the user let the search start
    result = await in_thread(
        lambda stop: grep_paths(base, regex, name_filter, limit, stop, allowed)
    )
    outcome = _grep_outcome(result, limit, str(args["pattern"]), base, ctx)
    locations = [{"path": str(p), "line": n} for p, n, _ in result.hits[:MAX_LOCATIONS]]
    return dataclasses.replace(outcome, locations=locations or None)


def _compile(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolFailure(f"Invalid regular expression {pattern!r}: {exc}") from exc


def _name_filter(glob: Any) -> Callable[[str], bool] | None:
    """A test on a file's path relative to the search root: on the name alone for `*.py`,
    on the whole relative path for patterns with '/' (like `src/**/*.ts`)."""
    if not isinstance(glob, str) or not glob:
        return None
    if "/" in glob:
        regex = pattern_regex([s for s in glob.split("/") if s])
        return lambda rel: regex.fullmatch(rel) is not None
    name_regex = re.compile(segment_regex(glob))
    return lambda rel: name_regex.fullmatch(rel.rsplit("/", 1)[-1]) is not None


def searchable_text(path: Path) -> str | None:
    """The file's text, or None for a file grep skips as binary or too big. OSError when it
    cannot be read."""
    if path.stat().st_size > GREP_MAX_FILE_BYTES:
        return None
    data = path.read_bytes()
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    # Lines are matched without their CR, so `foo$` finds `foo` in a CRLF file too.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def grep_paths(
    base: Path,
    regex: re.Pattern[str],
    name_filter: Callable[[str], bool] | None,
    limit: int,
    stop: threading.Event,
    allowed: tuple[Path, ...],
) -> GrepResult:
    """Matching lines under `base` (a file or a directory), at most `limit` of them. A linked
    file is read only when it leads inside `allowed`."""
    result = GrepResult()
    prefilter = _prefilter(regex)
    for path in _files(base, name_filter, stop):
        if stop.is_set():
            break
        if path.is_symlink() and not inside_roots(path, allowed):
            result.outside.append(path)
            continue
        text = _text_or_skip(path, base, result)
        if text is None or (prefilter and not prefilter.search(text)):
            continue
        for number, line in enumerate(text.split("\n"), 1):
            if regex.search(line):
                if len(result.hits) == limit:
                    result.cut = True
                    return result
                result.hits.append((path, number, line))
    return result


def _text_or_skip(path: Path, base: Path, result: GrepResult) -> str | None:
    """The text to search, or None (counted when unreadable); a ToolFailure when `base` itself,
    a single file, cannot be searched."""
    try:
        text = searchable_text(path)
    except OSError as exc:
        if path == base:
            raise ToolFailure(f"Cannot read {base}: {exc.strerror or exc}") from exc
        result.unreadable += 1
        return None
    if text is None and path == base:
        raise ToolFailure(f"{base} is binary or larger than 2 MiB; grep does not search it.")
    return text


def _prefilter(regex: re.Pattern[str]) -> re.Pattern[str] | None:
    """A whole-file test that passes every file with a matching line (so most files are
    skipped with one search), or None for patterns where that cannot be promised."""
    if any(token in regex.pattern for token in ("\\A", "\\Z", "(?<")):
        return None
    return re.compile(regex.pattern, regex.flags | re.MULTILINE)


def _files(
    base: Path, name_filter: Callable[[str], bool] | None, stop: threading.Event
) -> Iterator[Path]:
    if base.is_file():
        yield base
        return
    for rel, is_dir in walk(base, stop):
        if not is_dir and (name_filter is None or name_filter(rel)):
            yield base / rel


def _grep_outcome(
    result: GrepResult, limit: int, pattern: str, base: Path, ctx: ToolContext
) -> ToolOutcome:
    notes = _skip_notes(result, ctx)
    if not result.hits:
        text = "\n".join([f"No matches for `{pattern}` in {_shown_dir(base, ctx)}.", *notes])
        return ToolOutcome(text, content=[text_content(text)])
    lines = [f"{shown_path(p, ctx)}:{n}: {_cut_line(t)}" for p, n, t in result.hits]
    if result.cut:
        lines.append(
            f"[Stopped after {limit} matches; there are more. Narrow the search with path, "
            "glob or a more specific pattern, or raise max_results.]"
        )
    text = "\n".join(lines + notes)
    return ToolOutcome(
        clip(text, MODEL_MAX_CHARS, "matches"),
        content=[text_content(clip(text, SHOW_MAX_CHARS, "matches"))],
    )


def _skip_notes(result: GrepResult, ctx: ToolContext) -> list[str]:
    """What the search left out and why, so a missing match is never a silent one."""
    notes = []
    if result.outside:
        count = len(result.outside)
        names = ", ".join(shown_path(p, ctx) for p in result.outside[:MAX_SKIPPED_NAMED])
        more = ", …" if count > MAX_SKIPPED_NAMED else ""
        what = "1 file is a link" if count == 1 else f"{count} files are links"
        notes.append(
            f"[Not searched: {what} to outside the project ({names}{more}). read_file can "
            "open one; it asks the user first.]"
        )
    if result.unreadable:
        what = "1 file" if result.unreadable == 1 else f"{result.unreadable} files"
        notes.append(
            f"[Not searched: {what} could not be read (a broken link, a link loop or no "
            "permission).]"
        )
    return notes


def _cut_line(line: str) -> str:
    return line if len(line) <= GREP_LINE_CHARS else line[:GREP_LINE_CHARS] + "…"


GREP = Tool(
    name="grep",
    description=(
        "Search file contents for a Python regular expression, line by line. `path` is a file "
        "or a directory (default: the working directory); `glob` filters file names (e.g. "
        "`*.py`, or `src/**/*.ts` to match the path). Prints `path:line: text` for each "
        f"matching line, paths relative to the working directory, at most `max_results` "
        f"(default {GREP_DEFAULT_RESULTS}). Skips binary files, files over 2 MiB, .git, "
        "node_modules, .venv and __pycache__, and does not follow links out of the project "
        "(it says which it skipped)."
    ),
    kind="search",
    effect="read",
    present=_present_grep,
    run=_grep,
)


# -- shared ------------------------------------------------------------------------------------


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown_dir(path: Path, ctx: ToolContext) -> str:
    shown = shown_path(path, ctx)
    return shown + "/" if path.is_dir() and not shown.endswith("/") else shown
