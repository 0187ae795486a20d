"""What a grep asks and finds, and the pure-Python search for where ripgrep is not available
(or for a pattern only Python's `re` understands, such as look-around and backreferences).

The search walks the tree with the same rules as ripgrep (`walk.py`, `ignore.py`) in a worker
thread, skips binary files and files over 2 MiB, reads each file once with a whole-file
prefilter, and stops at the next file once the call is cancelled or has enough.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from acp_server.tools.base import ToolFailure
from acp_server.tools.search.ignore import DEFAULT, Scope
from acp_server.tools.search.walk import walk

MAX_FILE_BYTES = 2 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class GrepQuery:
    pattern: str
    ignore_case: bool = False
    multiline: bool = False
    before: int = 0
    after: int = 0
    files_only: bool = False
    limit: int = 200
    scope: Scope = DEFAULT
    type_glob: str | None = None  # a name pattern rg can prefilter with
    path_filter: Callable[[str], bool] | None = None  # on the path relative to the base


@dataclass(frozen=True)
class Hit:
    path: Path
    line: int  # 0 in files-only mode
    text: str
    match: bool = True  # False for a context line


@dataclass
class GrepResult:
    hits: list[Hit] = field(default_factory=list)
    cut: bool = False  # more matches than the limit
    unreadable: int = 0  # files that could not be read


def not_searchable(path: Path) -> str | None:
    """Why grep does not search this single file (binary, too big), or None when it does."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return f"{path} is larger than 2 MiB; grep does not search it."
        with path.open("rb") as f:
            head = f.read(BINARY_SNIFF_BYTES)
    except OSError as exc:
        raise ToolFailure(f"Cannot read {path}: {exc.strerror or exc}") from exc
    return f"{path} is a binary file; grep does not search it." if b"\0" in head else None


def searchable_text(path: Path) -> str | None:
    """The file's text, or None for a binary or too big file, or one that is not a regular
    file (a FIFO made in the project would block the read forever). OSError when unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES or b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    # Lines are matched without their CR, so `foo$` finds `foo` in a CRLF file too.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def python_regex(query: GrepQuery) -> re.Pattern[str]:
    flags = (re.IGNORECASE if query.ignore_case else 0) | re.MULTILINE
    try:
        with warnings.catch_warnings():  # e.g. "possible nested set": a note, not an error
            warnings.simplefilter("ignore")
            return re.compile(query.pattern, flags)
    except re.error as exc:
        raise ToolFailure(f"Invalid regular expression {query.pattern!r}: {exc}") from exc


def grep_python(base: Path, query: GrepQuery, stop: threading.Event) -> GrepResult:
    """Matching lines (or files) under `base`, a file or a directory, up to the limit."""
    regex = python_regex(query)
    whole = query.multiline or not any(t in query.pattern for t in ("\\A", "\\Z", "(?<"))
    result = GrepResult()
    matches = 0
    for path in _files(base, query, stop):
        try:
            text = searchable_text(path)
        except OSError:
            result.unreadable += 1
            continue
        if text is None or (whole and not regex.search(text)):  # most files: one search
            continue
        hits = file_hits(path, text, regex, query)
        if not any(hit.match for hit in hits):
            continue
        if query.files_only:
            hits = [Hit(path, 0, "")]
        for hit in hits:
            if hit.match and matches == query.limit:
                result.cut = True
                return result
            matches += hit.match
            result.hits.append(hit)
    return result


def file_hits(path: Path, text: str, regex: re.Pattern[str], query: GrepQuery) -> list[Hit]:
    """The matching lines of one file (every line a multiline match spans) and their context."""
    lines = text.split("\n")
    matched: set[int] = set()
    if query.multiline:
        for m in regex.finditer(text):
            first = text.count("\n", 0, m.start())
            last = first + text.count("\n", m.start(), max(m.end() - 1, m.start()))
            matched.update(range(first, last + 1))
    else:
        single = re.compile(regex.pattern, regex.flags & ~re.MULTILINE)
        matched = {k for k, line in enumerate(lines) if single.search(line)}
    if text.endswith("\n"):
        matched.discard(len(lines) - 1)  # the empty "line" after the last line break
    shown = set(matched)
    for k in matched:
        shown.update(range(max(k - query.before, 0), min(k + query.after + 1, len(lines))))
    if text.endswith("\n"):
        shown.discard(len(lines) - 1)
    return [Hit(path, k + 1, lines[k], k in matched) for k in sorted(shown)]


def _files(base: Path, query: GrepQuery, stop: threading.Event) -> Iterator[Path]:
    if base.is_file():
        yield base
        return
    for rel, is_dir in walk(base, stop, None, query.scope):
        if stop.is_set():
            return
        if not is_dir and (query.path_filter is None or query.path_filter(rel)):
            yield base / rel
