"""Search tools: glob (find files by name pattern) and grep (find lines by regex).

Both are pure Python, so they work where ripgrep is not installed. They walk the disk in a
worker thread so the event loop keeps serving the editor, prune the directories nobody means
to search (`.git`, `node_modules`, virtualenvs, bytecode caches) instead of filtering them
afterwards, and stop at the next file once the call is cancelled. Paths in their output are
relative to the session's working directory, so the model can pass them straight to
read_file or edit_file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from acp_server.tools.base import (
    Permit,
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    clip,
    text_content,
)
from acp_server.tools.fs import arg_path, shown_path

SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})
GLOB_MAX_SHOWN = 500
GLOB_MAX_COLLECTED = 100_000
GREP_DEFAULT_RESULTS = 200
GREP_MAX_RESULTS = 2000
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024
GREP_LINE_CHARS = 300
BINARY_SNIFF_BYTES = 8192
MODEL_MAX_CHARS = 60_000
SHOW_MAX_CHARS = 8_000
MAX_LOCATIONS = 10
_MAGIC = re.compile(r"[*?\[{]")

T = TypeVar("T")


async def in_thread(work: Callable[[threading.Event], T]) -> T:
    """Run blocking `work` in a worker thread; when the caller is cancelled (or done), the
    event it was handed is set so it stops at its next check."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(work, stop)
    finally:
        stop.set()


# -- glob patterns -----------------------------------------------------------------------------


def split_pattern(pattern: str) -> tuple[str, list[str]]:
    """The literal leading directories of a glob pattern, and the segments left to match."""
    segments = [s for s in pattern.split("/") if s]
    k = 0
    while k < len(segments) - 1 and not _MAGIC.search(segments[k]):
        k += 1
    prefix = "/".join(segments[:k])
    return ("/" + prefix if pattern.startswith("/") else prefix), segments[k:]


def pattern_regex(segments: list[str]) -> re.Pattern[str]:
    """A regex matching relative '/'-separated paths: `**` spans directories, `*` and `?`
    stay within one name, `[abc]` and `{a,b}` work as in shells."""
    parts: list[str] = []
    for k, segment in enumerate(segments):
        last = k == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(parts))


def _segment_regex(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        char, end = segment[i], -1
        if char == "[":
            end = segment.find("]", i + 2)
            if end != -1:
                out.append(_class_regex(segment[i + 1 : end]))
        elif char == "{":
            end = segment.find("}", i + 1)
            if end != -1:
                options = segment[i + 1 : end].split(",")
                out.append("(?:" + "|".join(_segment_regex(o) for o in options) + ")")
        if end != -1:
            i = end + 1
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(char) or re.escape(char))
        i += 1
    return "".join(out)


def _class_regex(body: str) -> str:
    negate = body.startswith("!")
    chars = "".join(c if c == "-" else re.escape(c) for c in body[negate:])
    return f"[^/{chars}]" if negate else f"[{chars}]"


def walk(
    root: Path, stop: threading.Event, max_depth: int | None = None
) -> Iterator[tuple[str, bool]]:
    """(path relative to `root` with '/' separators, is a directory) for what lies under
    `root`, skipping SKIP_DIRS and not following directory symlinks."""
    for dirpath, dirnames, filenames in os.walk(root):
        if stop.is_set():
            return
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        yield from ((prefix + d, True) for d in dirnames)
        yield from ((prefix + f, False) for f in filenames)
        depth = prefix.count("/")
        if max_depth is not None and depth + 1 >= max_depth:
            dirnames[:] = []


def find_matches(root: Path, segments: list[str], stop: threading.Event) -> tuple[list[str], int]:
    """Up to GLOB_MAX_COLLECTED matching paths under `root` (directories end with '/'), and
    how many matched in all."""
    regex = pattern_regex(segments)
    depth = None if any("**" in s for s in segments) else len(segments)
    found: list[str] = []
    total = 0
    for rel, is_dir in walk(root, stop, depth):
        if regex.fullmatch(rel):
            total += 1
            if len(found) < GLOB_MAX_COLLECTED:
                found.append(rel + "/" if is_dir else rel)
    return found, total


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
    shown = sorted(_shown_match(root, rel, ctx) for rel in found)
    return _glob_outcome(shown, total, str(args["pattern"]), root, ctx)


def _shown_match(root: Path, rel: str, ctx: ToolContext) -> str:
    return shown_path(root / rel, ctx) + ("/" if rel.endswith("/") else "")


def _glob_outcome(
    shown: list[str], total: int, pattern: str, root: Path, ctx: ToolContext
) -> ToolOutcome:
    if not shown:
        text = f"No files match {pattern} under {_shown_dir(root, ctx)}."
        return ToolOutcome(text, content=[text_content(text)])
    lines = shown[:GLOB_MAX_SHOWN]
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
        "node_modules, .venv and __pycache__."
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
    result = await in_thread(lambda stop: grep_paths(base, regex, name_filter, limit, stop))
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
    name_regex = re.compile(_segment_regex(glob))
    return lambda rel: name_regex.fullmatch(rel.rsplit("/", 1)[-1]) is not None


def searchable_text(path: Path) -> str | None:
    """The file's text, or None for a file grep skips: unreadable, binary or too big."""
    try:
        if path.stat().st_size > GREP_MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
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
) -> GrepResult:
    """Matching lines under `base` (a file or a directory), at most `limit` of them."""
    result = GrepResult()
    prefilter = _prefilter(regex)
    for path in _files(base, name_filter, stop):
        if stop.is_set():
            break
        text = searchable_text(path)
        if text is None and path == base:
            raise ToolFailure(f"{base} is binary or larger than 2 MiB; grep does not search it.")
        if text is None or (prefilter and not prefilter.search(text)):
            continue
        for number, line in enumerate(text.split("\n"), 1):
            if regex.search(line):
                if len(result.hits) == limit:
                    result.cut = True
                    return result
                result.hits.append((path, number, line))
    return result


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
    if not result.hits:
        text = f"No matches for `{pattern}` in {_shown_dir(base, ctx)}."
        return ToolOutcome(text, content=[text_content(text)])
    lines = [f"{shown_path(p, ctx)}:{n}: {_cut_line(t)}" for p, n, t in result.hits]
    if result.cut:
        lines.append(
            f"[Stopped after {limit} matches; there are more. Narrow the search with path, "
            "glob or a more specific pattern, or raise max_results.]"
        )
    text = "\n".join(lines)
    return ToolOutcome(
        clip(text, MODEL_MAX_CHARS, "matches"),
        content=[text_content(clip(text, SHOW_MAX_CHARS, "matches"))],
    )


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
        "node_modules, .venv and __pycache__."
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
