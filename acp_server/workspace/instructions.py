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

from acp_server.confine import files, secrets

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
READ_BYTES = 4 * 1024 * 1024  # a larger file is not read at all (it is clipped to FILE_CHARS)
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
    """One instructions file as read: where, for which folder, its text (clipped or not); or,
    with `skipped` set, a file that was not read and why."""

    path: Path
    scope: str  # "user" | "project" | "nested"
    text: str
    size: int  # characters in the file
    clipped: bool
    skipped: str = ""  # why the file was not read ("" when it was)


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
    """Reads instruction files, again only when one changed (size, mtime).

    A file is read only where it really is: a link (the file's own, or a folder's on the way)
    is followed only to a regular file inside `roots` (real paths; without roots, the folder
    it was looked for in) that is not a secret place (`confine.secrets.is_secret`). The
    user's own file may lead anywhere but a secret place. Anything else is skipped, and why
    is kept in `skipped` for the notes. The file is opened at the path that was checked with
    no link followed, so a link swapped in meanwhile is not followed either."""

    def __init__(self, roots: Iterable[Path] = ()) -> None:
        self.roots = tuple(Path(os.path.realpath(root)) for root in roots)
        self._cache: dict[Path, tuple[tuple[int, int], str]] = {}
        self.skipped: dict[Path, str] = {}

    def first_in(self, folder: Path, scope: str = "project") -> tuple[Path, str] | None:
        """The first of NAMES that is a readable file in `folder`, with its text (the ones
        before it that were skipped are in `skipped`)."""
        for name in NAMES:
            path = folder / name
            text = self.read(path, scope)
            if text is not None:
                return path, text
        return None

    def read(self, path: Path, scope: str = "project") -> str | None:
        """The file's text (cached by size and mtime); None when it is not a readable file
        or was skipped (then `skipped[path]` says why)."""
        self.skipped.pop(path, None)
        if not os.path.lexists(path):
            self._cache.pop(path, None)
            return None
        real = Path(os.path.realpath(path))
        why = self._refusal(path, real, scope)
        if why:
            self.skipped[path] = why
            return None
        try:
            with files.open_regular(real) as file:
                return self._text(path, file)
        except files.Refused as exc:
            if "is a directory" not in str(exc):  # a FIFO, a device, too large, swapped
                self.skipped[path] = f"it could not be read: {exc}"
            return None
        except OSError:
            return None

    def _refusal(self, path: Path, real: Path, scope: str) -> str:
        """Why the file at `path`, which leads to `real`, is not read ("" when it is)."""
        leads = f"it leads to {real}"
        linked = real != Path(os.path.realpath(path.parent)) / path.name
        if linked and secrets.is_secret(real):
            return f"{leads}, where keys and credentials are kept"
        if scope == "user":
            return ""
        bases = self.roots or (Path(os.path.realpath(path.parent)),)
        if not any(real == base or base in real.parents for base in bases):
            return f"{leads}, outside the project"
        return ""

    def _text(self, path: Path, file: files.Opened) -> str:
        info = os.fstat(file.fd)
        key = (info.st_size, info.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        text = file.read(READ_BYTES, "an instructions file").decode("utf-8", errors="replace")
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
        hit = reader.first_in(folder, scope)
        for path in (folder / name for name in NAMES):
            why = reader.skipped.get(path)
            if why and path not in seen:
                seen.add(path)
                found.append(Found(path, scope, "", 0, False, skipped=why))
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
        if item.skipped:
            why = item.skipped.rstrip(".")
            parts.append(f"[{shown_path(item.path, root)} was not read: {why}.]")
            continue
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
