"""Which files the search tools leave out: ignore rules, hidden names, and the user's switches.

The rules are git's and ripgrep's, so a search shows what `git status` and `rg` would:
`.gitignore` files (nested ones too, the deeper one winning), `.ignore` and `.rgignore` files
(which win over `.gitignore` in the same folder), `.git/info/exclude`, and the user's global
excludes file (git's `core.excludesFile`, by default `~/.config/git/ignore`). As in ripgrep,
the git rules apply only inside a git repository; `.ignore` applies anywhere. Names starting
with a dot are hidden unless asked for, `.git` itself is never searched, and `node_modules`,
`.venv` and `__pycache__` are left out like ignored folders even without a `.gitignore`.

This module is the pure-Python reading of those rules (with `pathspec`, git's own matching
semantics): list_directory uses it, and so do grep and glob where ripgrep is not available.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server.confine import own_git

if TYPE_CHECKING:
    import pathspec

NEVER = frozenset({".git"})
BUILT_IN_IGNORED = frozenset({"node_modules", ".venv", "__pycache__"})
_GIT_TIMEOUT = 2.0
_CACHE_SECONDS = 2.0  # the git config is read at most this often for one search root
_CACHE_ENTRIES = 256
_cache: dict[tuple[str, ...], tuple[float, Path | None]] = {}


@dataclass(frozen=True)
class Scope:
    """What the user asked to see beyond the default: hidden names, ignored files."""

    hidden: bool = False
    ignored: bool = False


DEFAULT = Scope()
EVERYTHING = Scope(hidden=True, ignored=True)


def git_root(path: Path) -> Path | None:
    """The nearest folder at or above `path` holding `.git` (a folder or a worktree's file)."""
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def global_excludes(cwd: Path) -> Path | None:
    """The user's global excludes file, as git finds it (core.excludesFile in the git config,
    honouring GIT_CONFIG_GLOBAL, HOME and XDG_CONFIG_HOME; else git's default), if it exists."""
    env = os.environ
    key = (str(cwd), *(env.get(k, "") for k in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL")))
    now = time.monotonic()
    cached = _cache.get(key)
    if cached is not None and now - cached[0] < _CACHE_SECONDS:
        return cached[1]
    found = _configured_excludes(cwd) or _default_excludes()
    path = found if found is not None and found.is_file() else None
    if len(_cache) >= _CACHE_ENTRIES:  # one per search root: keep a long session's bounded
        _cache.clear()
    _cache[key] = (now, path)
    return path


def _configured_excludes(cwd: Path) -> Path | None:
    # As the agent's own git: the minimal environment, no pager, nothing the repository names.
    value = own_git.config_get("git", cwd, "core.excludesFile", _GIT_TIMEOUT, "--type=path")
    return Path(value).expanduser() if value else None


def _default_excludes() -> Path | None:
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    if base:
        return Path(base) / "git" / "ignore"
    home = os.environ.get("HOME", "").strip()
    return Path(home) / ".config" / "git" / "ignore" if home else None


def _spec(path: Path) -> pathspec.GitIgnoreSpec | None:
    # Imported at the first ignore file read (~10 ms: it probes its optional regex engines),
    # not with the tools: the first prompt's request is built without it.
    import pathspec

    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


@dataclass(frozen=True)
class _Level:
    """The rules one folder adds, to be matched against paths relative to that folder."""

    base: str  # the folder, as a posix path ending in "/"
    specs: tuple[pathspec.GitIgnoreSpec, ...]  # strongest first


def _verdict(levels: list[_Level], path: Path, is_dir: bool) -> bool | None:
    """True when ignored, False when a rule re-includes it, None when no rule speaks."""
    full = path.as_posix() + ("/" if is_dir else "")
    for level in reversed(levels):  # the deepest folder's rules win
        rel = full[len(level.base) :]  # string slicing: Path.relative_to costs ten times more
        for spec in level.specs:
            include = spec.check_file(rel).include
            if include is not None:
                return include
    return None


def _within(level: _Level, root: Path) -> _Level:
    """`level` without the rules that ignore `root` itself or a folder above it: a search the
    user started inside an ignored folder (`path: build`) looks at what is in it, as rg does."""
    rel = _folder(root)[len(level.base) :]
    if not rel:
        return level
    import pathspec

    specs = []
    for spec in level.specs:
        kept = [p for p in spec.patterns if not (p.include and p.match_file(rel))]
        if kept:
            specs.append(pathspec.GitIgnoreSpec(kept))
    return _Level(level.base, tuple(specs))


def _folder(path: Path) -> str:
    return path.as_posix().rstrip("/") + "/"


class Rules:
    """The ignore rules in force under one search root, read as the walk enters folders."""

    def __init__(self, root: Path, scope: Scope) -> None:
        self.scope = scope
        self.repo = None if scope.ignored else git_root(root)
        self.levels: list[_Level] = []
        self.tail: list[_Level] = []  # info/exclude and the global file: weakest, repo-wide
        if scope.ignored:
            return
        if self.repo is not None:
            for path in (self.repo / ".git" / "info" / "exclude", global_excludes(root)):
                spec = _spec(path) if path is not None else None
                if spec is not None:
                    self.tail.append(_within(_Level(_folder(self.repo), (spec,)), root))
        for folder in reversed((root, *root.parents)):
            level = _within(self.level(folder), root)
            if level.specs:
                self.levels.append(level)

    def level(self, folder: Path) -> _Level:
        """The rules `folder`'s own ignore files add."""
        if self.scope.ignored:
            return _Level(_folder(folder), ())
        names = [".rgignore", ".ignore"]  # ripgrep's own file, then the one all tools read
        if self.repo is not None and folder.is_relative_to(self.repo):
            names.append(".gitignore")
        specs = (_spec(folder / name) for name in names)
        return _Level(_folder(folder), tuple(s for s in specs if s is not None))

    def skips(self, path: Path, is_dir: bool, levels: list[_Level] | None = None) -> bool:
        """Whether a search leaves `path` out (not looking at the folders above it)."""
        name = path.name
        if name in NEVER:
            return True
        if name.startswith(".") and not self.scope.hidden:
            return True
        if self.scope.ignored:
            return False
        if is_dir and name in BUILT_IN_IGNORED:
            return True
        verdict = _verdict(levels if levels is not None else self.levels, path, is_dir)
        if verdict is None:
            verdict = _verdict(self.tail, path, is_dir)
        return bool(verdict)
