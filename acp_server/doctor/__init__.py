"""`acp-server doctor`: what stands between a person and a working agent, one line per check.

Each check is a small function returning `Check`s: what was looked at and what was found, and
for a problem, what to do about it, written for someone who has not read the code. The groups:

- `setup`: the configuration file and the models it (or the command line) names;
- `servers`: which model servers are asked (the models named, the providers set up, what
  discovery finds) and the model new sessions start with;
- `remote`: each model server: reachable, the key accepted, the model there, its window and
  whether it calls tools (asked with one tiny request only with `--live`, in `live`);
- `local`: the session store, the remembered permissions, the log file, and the command an
  editor should be given.

`render` writes them with ✔ / ! / ✘ (plain ASCII where the terminal cannot show those). Keys are
never shown: only which variable holds one and whether it is set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TextIO

Status = Literal["ok", "warn", "fail"]
SYMBOLS: dict[Status, tuple[str, str]] = {
    "ok": ("✔", "[ok]"),
    "warn": ("!", "[!]"),
    "fail": ("✘", "[x]"),
}
ARROW = ("→", "->")


@dataclass(frozen=True)
class Check:
    """One finding: its status, one line saying what was found, and what to do (if anything)."""

    status: Status
    line: str
    advice: str = ""


def ok(line: str) -> Check:
    return Check("ok", line)


def warn(line: str, advice: str) -> Check:
    return Check("warn", line, advice)


def fail(line: str, advice: str) -> Check:
    return Check("fail", line, advice)


def can_show(stream: TextIO, text: str) -> bool:
    """Whether `stream`'s encoding can write `text` (else the ASCII symbols are used)."""
    try:
        text.encode(stream.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def fitted(stream: TextIO, text: str) -> str:
    """`text`, in plain ASCII if `stream` cannot write it as it is."""
    return text if can_show(stream, text) else _ascii(text)


def render(checks: Iterable[Check], stream: TextIO) -> None:
    """One line per check, the advice indented below it, and a closing summary."""
    listed = list(checks)
    fancy = 0 if can_show(stream, "✔✘→·") else 1
    for check in listed:
        text = check.line if fancy == 0 else _ascii(check.line)
        stream.write(f"{SYMBOLS[check.status][fancy]} {text}\n")
        for advice in check.advice.splitlines():
            advice = advice if fancy == 0 else _ascii(advice)
            stream.write(f"    {ARROW[fancy]} {advice}\n" if advice else "")
    stream.write(summary(listed) + "\n")


def summary(checks: list[Check]) -> str:
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    if not failed:
        tail = f" ({_count(warned, 'warning')} to read)" if warned else ""
        return f"No problem found{tail}."
    extra = f" and {_count(warned, 'warning')}" if warned else ""
    return (
        f"{_count(failed, 'problem')}{extra}: fix what the lines marked as failed say, then run "
        "`acp-server doctor` again."
    )


def _count(n: int, word: str) -> str:
    return f"1 {word}" if n == 1 else f"{n} {word}s"


def _ascii(text: str) -> str:
    return text.replace("→", "->").replace("·", "-").encode("ascii", "replace").decode("ascii")
