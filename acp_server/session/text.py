"""What a session says: the system prompt, the title of a conversation, and the messages it
shows the user about itself (split from session.py, which holds the behaviour)."""

from __future__ import annotations

import functools
from pathlib import Path

from acp_server.messages import Message

TITLE_CHARS = 60


@functools.cache
def _template(name: str) -> str:
    return (Path(__file__).parent.parent / "prompts" / name).read_text("utf-8")


# With a client's override prompt, what of ours stays: where the project is, and the rules
# of the permission modes (the tools and permissions themselves do not change).
ROOTS = "You work in the project at {cwd}{extra_roots}; paths may be absolute or relative to {cwd}."


def system_prompt(cwd: Path, extra: tuple[Path, ...], override: str | None = None) -> str:
    """The packaged system prompt, filled in for this session's roots; with `override` (the
    client's prompt), that text in place of our instructions, the roots and mode rules kept."""
    roots = f" (and also {', '.join(map(str, extra))})" if extra else ""
    ours = _template("system.md") if override is None else ROOTS + "\n"
    filled = (ours + "\n" + _template("rules.md")).format(cwd=cwd, extra_roots=roots)
    return filled if override is None else override + "\n\n" + filled


def subagent_prompt(cwd: Path, extra: tuple[Path, ...]) -> str:
    """The system prompt of a subagent (`subagents`): its job comes from the parent."""
    roots = f" (and also {', '.join(map(str, extra))})" if extra else ""
    text = _template("subagent.md") + "\n" + _template("rules.md")
    return text.format(cwd=cwd, extra_roots=roots)


def title_for(message: Message) -> str:
    """A short, deterministic title: the first line of the first prompt, cut on a word."""
    text = " ".join(message.text.split())
    if len(text) <= TITLE_CHARS:
        return text or "Untitled"
    cut = text.rfind(" ", 0, TITLE_CHARS)
    return text[: cut if cut > TITLE_CHARS // 2 else TITLE_CHARS].rstrip() + "…"


CLEARED = (
    "Started a fresh context: the model no longer sees the earlier conversation. It is still "
    "in this session's saved history, and shown when the session is loaded."
)

NOT_SAVED = (
    "This turn could not be saved to the session history ({path}), so it will be missing "
    "when this session is loaded again. The conversation itself can go on. Check that the "
    "disk is not full and that the file is writable; the agent's log has the details."
)
INTERNAL_FAILURE = (
    "Something went wrong inside the agent and this turn was stopped. "
    "The session still works; the agent's log has the details."
)
