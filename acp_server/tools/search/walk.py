"""Walking a project tree for the search tools (where ripgrep is not available), and the glob
patterns they match.

The walk runs in a worker thread (so the event loop keeps serving the editor), leaves out what
the ignore rules, hidden names and the user's switches say (`ignore.py`) by pruning folders
instead of filtering afterwards, never follows a link (so it cannot wander out of the tree it
was given, or loop), and stops at the next directory once the call is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from acp_server.tools.search.ignore import DEFAULT, Rules, Scope

GLOB_MAX_COLLECTED = 100_000
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
            parts.append(segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(parts))


def segment_regex(segment: str) -> str:
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
                out.append("(?:" + "|".join(segment_regex(o) for o in options) + ")")
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
    root: Path, stop: threading.Event, max_depth: int | None = None, scope: Scope = DEFAULT
) -> Iterator[tuple[str, bool]]:
    """(path relative to `root` with '/' separators, is a directory) for what a search sees
    under `root`: ignore rules and hidden names as in `ignore.py`, symlinks not followed (and
    not listed: ripgrep leaves them out too)."""
    rules = Rules(root, scope)
    stack = [(root, "", rules.levels)]
    while stack and not stop.is_set():
        folder, prefix, levels = stack.pop()
        if folder != root and (level := rules.level(folder)).specs:
            levels = [*levels, level]
        entries = _entries(folder)
        dirs = []
        for name, is_dir in entries:
            if rules.skips(folder / name, is_dir, levels):
                continue
            yield prefix + name, is_dir
            if is_dir and (max_depth is None or prefix.count("/") + 1 < max_depth):
                dirs.append((folder / name, prefix + name + "/", levels))
        stack.extend(reversed(dirs))


def _entries(folder: Path) -> list[tuple[str, bool]]:
    """(name, is a directory) in `folder`, sorted, without symlinks; [] when unreadable."""
    try:
        with os.scandir(folder) as it:
            return sorted(
                (e.name, e.is_dir(follow_symlinks=False)) for e in it if not e.is_symlink()
            )
    except OSError:
        return []


def find_matches(
    root: Path, segments: list[str], stop: threading.Event, scope: Scope = DEFAULT
) -> tuple[list[str], int]:
    """Up to GLOB_MAX_COLLECTED matching paths under `root` (directories end with '/'), and
    how many matched in all."""
    regex = pattern_regex(segments)
    depth = None if any("**" in s for s in segments) else len(segments)
    found: list[str] = []
    total = 0
    for rel, is_dir in walk(root, stop, depth, scope):
        if regex.fullmatch(rel):
            total += 1
            if len(found) < GLOB_MAX_COLLECTED:
                found.append(rel + "/" if is_dir else rel)
    return found, total
