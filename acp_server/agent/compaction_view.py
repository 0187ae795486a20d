"""A compaction as the editor sees it: `compaction_update`s (with the summary as
`compaction_summary_chunk`s) when the client shows them (`session.compaction`), else a
"Compacting conversation" tool-call card of kind `think` — live (`Shown`) and on replay
(`as_card`, from the one terminal `compaction_update` the store keeps)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from acp_server import updates

Emit = Callable[[updates.Update], None]
CARD_TITLE = "Compacting conversation"


class Shown:
    """A compaction as the user sees it: `compaction_update`s when the client shows them,
    else a tool-call card of kind `think`."""

    def __init__(self, emit: Emit, native: bool) -> None:
        self._emit = emit
        self._native = native
        self._id = f"compact_{uuid.uuid4().hex[:12]}"
        if native:
            emit(compaction_update(self._id, "in_progress"))
        else:
            emit(updates.tool_call(self._id, CARD_TITLE, name="compact", kind="think"))
            emit(updates.tool_call_update(self._id, status="in_progress"))

    def ended(self, status: str, line: str, summary: str = "") -> None:
        if not self._native:
            final = "completed" if status == "completed" else "failed"
            content = [updates.text_content(line)]
            self._emit(updates.tool_call_update(self._id, status=final, content=content))
            return
        for text in _chunks(summary or line) if status == "completed" else ():
            self._emit(
                {
                    "sessionUpdate": "compaction_summary_chunk",
                    "compactionId": self._id,
                    "content": updates.text_block(text),
                }
            )
        self._emit(compaction_update(self._id, status, error=line if status == "failed" else None))


def compaction_update(compaction_id: str, status: str, **fields: Any) -> updates.Update:
    update: updates.Update = {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": status,
    }
    update.update({k: v for k, v in fields.items() if v is not None})
    return update


def _chunks(text: str) -> list[str]:
    """The summary in paragraphs, as it would have streamed."""
    parts = text.split("\n\n")
    return [p + ("\n\n" if i < len(parts) - 1 else "") for i, p in enumerate(parts) if p]


def as_card(update: updates.Update) -> list[updates.Update]:
    """A stored (terminal) `compaction_update`, for a client that does not show them: the same
    compaction as a card of kind `think` (on replay)."""
    summary = update.get("summary") or []
    text = "".join(b.get("text", "") for b in summary if isinstance(b, dict))
    status = "completed" if update.get("status") == "completed" else "failed"
    card_id = str(update.get("compactionId"))
    line = text or str(update.get("error") or "The compaction did not complete.")
    return [
        updates.tool_call(card_id, CARD_TITLE, name="compact", kind="think", status=status),
        updates.tool_call_update(card_id, status=status, content=[updates.text_content(line)]),
    ]
