"""Who decides what runs: session modes, the roots, and remembered "always" rules.

    decide(effect, permit, mode, roots, rules) -> Decision(allow | ask | deny)

| effect   | ask mode | accept edits | plan | bypass | outside the roots      |
|----------|----------|--------------|------|--------|------------------------|
| read     | allow    | allow        | allow| allow  | ask (every mode)       |
| edit     | ask      | allow        | deny | allow  | ask (deny in plan)     |
| execute  | ask      | ask          | deny | allow  | ask (deny in plan)     |
| sandboxed execute | allow | allow  | deny | allow  | ask (deny in plan)     |
| fetch    | ask      | ask          | ask  | allow  | —                      |
| think    | allow    | allow        | allow| allow  | —                      |

Paths are compared after resolving symlinks and `..`, so a link that points out of the
project counts as outside, and so does a secret place inside it (`confine.secrets`: a session
whose folder is HOME still asks before `~/.ssh` is read). Remembered rules never reach
outside the roots.

"Always" answers become scoped rules: a command rule matches the same leading words
(`git status` allows `git status --short`, never `git push` or `rm`), and never matches a
command line with shell operators (`;`, `&&`, `|`, redirections, `$(…)`), since those can
chain anything behind an allowed prefix. A command that asks to run outside the sandbox (an
escalation) is never allowed by a rule, old rule files included, and is offered no "always":
what `make` runs is the Makefile, which a command in the sandbox may rewrite without a
question. An edit rule covers one directory tree; a fetch rule,
one host (`docs.python.org`). Rules live
for the session and are saved per project directory (see `RuleStore`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from acp_server.confine import secrets
from acp_server.modes import MODE_IDS as MODE_IDS
from acp_server.modes import MODES as MODES
from acp_server.modes import Mode as Mode
from acp_server.modes import is_mode as is_mode
from acp_server.settings import data_dir

Verdict = Literal["allow", "ask", "deny"]
# What a call does, for the rules: reads run inside the roots, edits and commands depend on
# the mode, "think" (plans) always runs. Each tool declares one.
Effect = Literal["read", "edit", "execute", "fetch", "think"]

PLAN_REFUSAL = (
    "Refused: the session is in Plan mode, which is read-only. Do not try to change files or "
    "run commands; describe the plan instead, and the user can switch modes to carry it out."
)
_SUBCOMMAND = re.compile(r"[A-Za-z][\w:.-]*")
_SHELL_SPECIAL = re.compile(r"[;&|<>`\n]|\$\(")


@dataclass(frozen=True)
class Permit:
    """What a call is about to do, for the permission decision and the request the user sees."""

    paths: tuple[Path, ...] = ()
    command: str | None = None  # the real command line, shown to the user as is
    cwd: Path | None = None  # where a command runs
    preview: list[dict[str, Any]] = field(default_factory=list)  # e.g. a diff
    # Overrides the tool's effect: an edit tool reading the old text first asks as a read.
    effect: Effect | None = None
    # A command that runs in the session's sandbox (it cannot write outside the roots or
    # reach the network): in ask and accept-edits mode it needs no question.
    sandboxed: bool = False
    reason: str | None = None  # why the model asks to run it outside the sandbox (shown)
    # A command asked to run outside a sandbox that is in force: no remembered rule allows it,
    # and "always allow" is not offered, since a command in the sandbox (no question asked)
    # could change what it runs (a Makefile, package.json's scripts, conftest.py).
    escalation: bool = False
    url: str | None = None  # a web page fetched (fetch rules match its host)
    # The paths were named through a link: `paths` is where it led when checked, and the
    # request the user sees says so (the title names the target).
    through_link: bool = False


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""


@dataclass(frozen=True)
class Rule:
    effect: Effect
    pattern: str  # execute: the leading words; edit/read: an absolute directory; fetch: a host
    allow: bool

    def matches(self, effect: Effect, permit: Permit) -> bool:
        if effect != self.effect:
            return False
        if effect == "execute":
            words = command_words(permit.command or "")
            prefix = self.pattern.split(" ")
            return words is not None and words[: len(prefix)] == prefix
        if effect == "fetch":
            return url_host(permit.url) == self.pattern
        return bool(permit.paths) and all(_under(p, Path(self.pattern)) for p in permit.paths)

    def describe(self) -> str:
        if self.effect == "execute":
            return f"`{self.pattern} …` commands"
        if self.effect == "fetch":
            return f"fetches from {self.pattern}"
        what = "edits" if self.effect == "edit" else "reads"
        return f"{what} under {self.pattern}"


def command_words(command: str) -> list[str] | None:
    """The words of a simple command; None when it has shell operators or does not parse."""
    if _SHELL_SPECIAL.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words or None


def rule_for(effect: Effect, permit: Permit, allow: bool) -> Rule | None:
    """The narrowest useful rule for an "always" answer to this request (None: none fits;
    an escalation out of the sandbox is allowed once at a time, never always)."""
    if allow and permit.escalation:
        return None
    if effect == "execute":
        words = command_words(permit.command or "")
        if not words:
            return None
        keep = 2 if len(words) > 1 and _SUBCOMMAND.fullmatch(words[1]) else 1
        return Rule("execute", " ".join(words[:keep]), allow)
    if effect == "fetch":
        host = url_host(permit.url)
        return Rule("fetch", host, allow) if host else None
    if effect in ("edit", "read") and permit.paths:
        folders = {str(real(p).parent) for p in permit.paths}
        common = os.path.commonpath(sorted(folders))
        return Rule(effect, common, allow)
    return None


def url_host(url: str | None) -> str:
    """The host of a URL, lowercased ("" when there is none)."""
    try:
        return (urlsplit(url or "").hostname or "").lower()
    except ValueError:
        return ""


def real(path: Path) -> Path:
    """The path with symlinks and `..` resolved (works for paths that do not exist yet)."""
    return Path(os.path.realpath(path))


def _under(path: Path, root: Path) -> bool:
    resolved, base = real(path), real(root)
    return resolved == base or base in resolved.parents


def inside_roots(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(_under(path, root) for root in roots)


def decide(
    effect: Effect, permit: Permit, mode: Mode, roots: tuple[Path, ...], rules: list[Rule]
) -> Decision:
    """allow / ask / deny for one call, per the table in the module docstring."""
    if effect == "think":
        return Decision("allow")
    if mode == "plan" and effect in ("edit", "execute"):
        return Decision("deny", PLAN_REFUSAL)
    touched = [*permit.paths, *([permit.cwd] if permit.cwd else [])]
    outside = [p for p in touched if not inside_roots(p, roots) or secrets.is_secret(p)]
    matching = [r for r in rules if r.matches(effect, permit)]
    if any(not r.allow for r in matching):
        return Decision("deny", "Refused: the user chose to always reject this kind of call.")
    if outside:
        where = "where keys are kept" if secrets.is_secret(outside[0]) else "outside the project"
        return Decision("ask", f"{outside[0]} is {where}")
    if effect == "read" or (matching and not permit.escalation):
        return Decision("allow")
    if effect == "execute" and permit.sandboxed and mode in ("ask", "accept_edits"):
        return Decision("allow")
    if effect == "edit" and mode in ("accept_edits", "bypass"):
        return Decision("allow")
    if effect in ("execute", "fetch") and mode == "bypass":
        return Decision("allow")
    return Decision("ask")


class RuleStore:
    """Remembered rules of one project directory, in a small JSON file.

    Where: `$ACP_SERVER_DATA_DIR/permissions/<hash of the project path>.json`, or the user
    data directory (`~/.local/share/acp-server/` on Linux) when that variable is unset.
    """

    def __init__(self, project: Path, data_dir: Path | None = None) -> None:
        self.project = project
        self._data_dir = data_dir

    @property
    def path(self) -> Path:
        base = self._data_dir or data_dir()
        digest = hashlib.sha256(str(self.project).encode()).hexdigest()[:24]
        return base / "permissions" / f"{digest}.json"

    def load(self) -> list[Rule]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return [Rule(r["effect"], r["pattern"], bool(r["allow"])) for r in data["rules"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def save(self, rules: list[Rule]) -> None:
        target = self.path
        target.parent.mkdir(parents=True, exist_ok=True)
        body = {"project": str(self.project), "rules": [asdict(r) for r in rules]}
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2), encoding="utf-8")
        os.replace(tmp, target)


class Permissions:
    """One session's mode and rules; "always" answers are saved for the project."""

    def __init__(self, store: RuleStore, mode: Mode = "ask") -> None:
        self.mode: Mode = mode
        self.store = store
        self._rules: list[Rule] | None = None

    @property
    def rules(self) -> list[Rule]:
        if self._rules is None:
            self._rules = self.store.load()
        return self._rules

    def decide(self, effect: Effect, permit: Permit, roots: tuple[Path, ...]) -> Decision:
        return decide(effect, permit, self.mode, roots, self.rules)

    def remember(self, rule: Rule) -> None:
        self.rules.append(rule)
        with contextlib.suppress(OSError):  # still remembered for this session
            self.store.save(self.rules)
