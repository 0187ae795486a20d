"""Project instructions: the AGENTS.md files (and the other common names) the model must follow.

Which files, in the order they are given to the model (a later, more specific file wins where
two disagree, and the prompt says so):

1. the user's own file, for every project: `AGENTS.md` in the configuration directory (beside
   config.toml, `~/.config/acp-server/AGENTS.md` on Linux);
2. the project's, from its root (the git root, else the session's working directory) down to
   the working directory, one file per directory;
3. nested ones: the folders the agent has worked in (a tool call touched a file there), once it
   has, from the shallowest folder to the deepest.

In each directory the first of `NAMES` that exists is read, and only that one: `AGENTS.md`, the
cross-vendor name, wins; the others are fallbacks for projects written for one tool.

Files are read again only when their size or modification time changed (a `stat` per file and
request), and each is clipped to `FILE_CHARS` (all of them together to `TOTAL_CHARS`, and to
`WINDOW_SHARE` of a small window: `total_for`) with a note saying so, so that a huge file cannot
take the model's whole window and make every request too large.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

NAMES = (
    "AGENTS.md",
    "CLAUDE.md",
    "AGENT.md",
    "GEMINI.md",
    ".github/copilot-instructions.md",
    ".rules",
    ".cursorrules",
)
FILE_CHARS = 16_000
TOTAL_CHARS = 40_000
WINDOW_SHARE = 0.2  # of the model's window (in tokens), the most all files together may take
CHARS_PER_TOKEN = 4  # the estimate's ballpark (context.tokens)
HEADER = (
    "# Project instructions\n"
    "The user and the project's authors wrote these instructions for you: follow them. When two "
    "disagree, the later (more specific) one wins; the user's requests in the conversation win "
    "over all of them."
)


@dataclass(frozen=True)
class Found:
    """One instructions file as read: where, for which folder, its text (clipped or not)."""

    path: Path
    scope: str  # "user" | "project" | "nested"
    text: str
    size: int  # characters in the file
    clipped: bool


def project_root(cwd: Path) -> Path:
    """The git root above `cwd` (a `.git` folder or file), else `cwd` itself."""
    for folder in (cwd, *cwd.parents):
        if has_git(folder):
            return folder
    return cwd


def has_git(folder: Path) -> bool:
    """Whether `folder` holds a `.git` folder or file. A path the system cannot look at (a
    name too long, a folder we may not enter: an editor may send any cwd) has none."""
    try:
        return os.path.lexists(folder / ".git")
    except (OSError, ValueError):
        return False


def chain(root: Path, folder: Path) -> list[Path]:
    """The folders from `root` down to `folder` (just `folder` when it is not under `root`)."""
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        return [folder]
    out = [root]
    for part in parts:
        out.append(out[-1] / part)
    return out


class Reader:
    """Reads instruction files, again only when one changed (size, mtime)."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[int, int], str]] = {}

    def first_in(self, folder: Path) -> tuple[Path, str] | None:
        """The first of NAMES that is a readable file in `folder`, with its text."""
        for name in NAMES:
            path = folder / name
            text = self.read(path)
            if text is not None:
                return path, text
        return None

    def read(self, path: Path) -> str | None:
        """The file's text (cached by size and mtime); None when it is not a readable file."""
        try:
            info = os.stat(path)
        except OSError:
            self._cache.pop(path, None)
            return None
        if not os.path.isfile(path):
            return None
        key = (info.st_size, info.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            text = path.read_text("utf-8", errors="replace")
        except OSError:
            return None
        self._cache[path] = (key, text)
        return text


def clip(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters on a line boundary when longer."""
    if len(text) <= limit:
        return text, False
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > limit // 2 else limit], True


def total_for(window: int | None) -> int:
    """The characters all files together may take with a window of `window` tokens."""
    if window is None:
        return TOTAL_CHARS
    return min(TOTAL_CHARS, int(window * WINDOW_SHARE * CHARS_PER_TOKEN))


def collect(
    reader: Reader, sources: Iterable[tuple[str, Path]], total: int = TOTAL_CHARS
) -> list[Found]:
    """The files of `sources` ((scope, folder), in order), each once, clipped to the limits."""
    found: list[Found] = []
    seen: set[Path] = set()
    room = total
    for scope, folder in sources:
        hit = reader.first_in(folder)
        if hit is None or hit[0] in seen:
            continue
        seen.add(hit[0])
        text, clipped = clip(hit[1], max(0, min(FILE_CHARS, room)))
        room -= len(text)
        found.append(Found(hit[0], scope, text, len(hit[1]), clipped))
    return found


def shown_path(path: Path, root: Path) -> str:
    """`path` relative to the project root when under it, else with ~ for the home folder."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        home = Path.home()
        return f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else str(path)


def render(found: list[Found], root: Path) -> str:
    """The system prompt's section for `found` ("" when there is none)."""
    if not found:
        return ""
    parts = [HEADER]
    for item in found:
        parts.append(
            f"## {shown_path(item.path, root)} ({_scope(item, root)})\n{item.text.strip()}"
        )
        if item.clipped:
            parts.append(
                f"[This file has {item.size:,} characters; only the first {len(item.text):,} "
                "are shown here. Read the file itself for the rest.]"
            )
    return "\n\n".join(parts)


def _scope(item: Found, root: Path) -> str:
    if item.scope == "user":
        return "the user's instructions, for every project"
    folder = item.path.parent
    if folder.name == ".github":
        folder = folder.parent
    where = shown_path(folder, root)
    if where == ".":
        return "the project's instructions"
    return f"for files under {where}/"
