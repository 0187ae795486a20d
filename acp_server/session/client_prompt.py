"""The client's system prompt (ACP `systemPrompt`, stable since 2026-11-06): read, kept, composed.

An editor may send `systemPrompt {mode, content}` on session/new, load, resume and fork.
`append` adds its text after everything we put in the system prompt (our base prompt, the
project instructions, the environment); `override` replaces our base prompt only: the tools,
the MCP servers and the permission rules stay, and so does the part of our prompt that states
the mode rules and the project's roots (`text.system_prompt`). A mode we do not know, a block
that is not text, or an empty list is refused (-32602) before any session is touched, so that
a client never believes its instructions were applied when they were not.

The prompt is kept in the session's stored state (`STATE_KEY`), so a session loaded or resumed
without one keeps it; one given there replaces it. It is part of the system prompt, so the
context budget counts it in the fixed part and compaction never summarises it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from acp_server.errors import InvalidParams

STATE_KEY = "systemPrompt"
MODES = ("append", "override")
# What initialize advertises: append (implied) and override.
CAPABILITY: dict[str, Any] = {"mode": {"override": {}}}

PromptMode = Literal["append", "override"]


@dataclass(frozen=True)
class ClientPrompt:
    mode: PromptMode
    text: str

    @property
    def override(self) -> str | None:
        """The text that replaces our base prompt (None: ours is kept)."""
        return self.text if self.mode == "override" else None

    @property
    def appendix(self) -> str:
        """What goes after everything else in the system prompt."""
        return "\n\n" + self.text if self.mode == "append" else ""

    def stored(self) -> dict[str, str]:
        return {"mode": self.mode, "text": self.text}


def parse(value: Any) -> ClientPrompt | None:
    """The `systemPrompt` param (already shape-checked by the method's schema); None when it is
    omitted or null. -32602 naming the field for what cannot be applied."""
    if value is None:
        return None
    mode = value["mode"]
    if mode not in MODES:
        raise InvalidParams(
            f"Invalid params: `systemPrompt.mode` {mode!r} is not supported; this agent "
            "supports 'append' (after its own instructions) and 'override' (instead of them). "
            "No session was changed.",
            {"field": "systemPrompt.mode"},
        )
    content = value["content"]
    if not content:
        raise InvalidParams(
            "Invalid params: `systemPrompt.content` is empty; send at least one text block, "
            "or leave `systemPrompt` out. No session was changed.",
            {"field": "systemPrompt.content"},
        )
    return ClientPrompt(mode, "\n\n".join(_texts(content)))


def _texts(content: list[dict[str, Any]]) -> list[str]:
    """The text of each block; -32602 at the first block that is not text."""
    texts = []
    for i, block in enumerate(content):
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise InvalidParams(
                f"Invalid params: `systemPrompt.content[{i}]` is a {block.get('type')!r} block; "
                "a system prompt can only be made of text blocks (with a `text` string). "
                "No session was changed.",
                {"field": f"systemPrompt.content[{i}]"},
            )
        texts.append(block["text"])
    return texts


def from_state(state: dict[str, Any]) -> ClientPrompt | None:
    """The prompt kept in a session's stored state (None: none, or not one we can read)."""
    kept = state.get(STATE_KEY)
    if not isinstance(kept, dict) or kept.get("mode") not in MODES:
        return None
    text = kept.get("text")
    return ClientPrompt(kept["mode"], text) if isinstance(text, str) else None


def state_of(prompt: ClientPrompt | None) -> dict[str, Any]:
    """The stored-state entry for `prompt` (an empty dict for none)."""
    return {STATE_KEY: prompt.stored()} if prompt is not None else {}
