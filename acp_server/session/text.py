"""What a session says: the system prompt, the title of a conversation, and the messages it
shows the user about itself (split from session.py, which holds the behaviour)."""

from __future__ import annotations

import functools
from pathlib import Path

from acp_server.messages import Message

TITLE_CHARS = 60


@functools.cache
def _system_template() -> str:
    return (Path(__file__).parent.parent / "prompts" / "system.md").read_text("utf-8")


def system_prompt(cwd: Path, extra: tuple[Path, ...]) -> str:
    """The packaged system prompt, filled in for this session's roots."""
    roots = f" (and also {', '.join(map(str, extra))})" if extra else ""
    return _system_template().format(cwd=cwd, extra_roots=roots)


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
