"""A compaction in the transcript: the rebuilt history is stored whole and `restore` continues
from it, the replay keeps the conversation as seen, and a compaction shown as it ran is kept as
one final `compaction_update` (a card for a client that does not show them)."""

from __future__ import annotations

from pathlib import Path

from acp_server.agent.compaction_view import as_card, compaction_update
from acp_server.messages import text_message
from acp_server.store.database import SessionRow, Store
from acp_server.store.transcript import Recorder, restore
from acp_server.updates import message_chunk


async def recorded(tmp_path: Path) -> tuple[Store, Recorder]:
    store = Store(tmp_path / "sessions.sqlite3")
    store.create(SessionRow("s", str(tmp_path), [], None, 1.0, 1.0, {}))
    return store, Recorder(store, "s")


async def test_restore_continues_from_the_rebuilt_history(tmp_path: Path) -> None:
    store, recorder = await recorded(tmp_path)
    for text in ("first", "second"):
        recorder.shown(message_chunk("user_message_chunk", text, None))
        recorder.message(text_message("user", text))
        recorder.message(text_message("assistant", f"answer to {text}"))
        recorder.turn_ended("end_turn")
    recorder.message(text_message("user", "third"))  # a compaction in the middle of a turn
    recorder.history([text_message("user", "summary"), text_message("user", "third")])
    recorder.message(text_message("assistant", "answer to third"))
    recorder.turn_ended("end_turn")
    await recorder.committed()
    restored = restore(store.events("s"), store.blob)
    assert [m.text for m in restored.history] == ["summary", "third", "answer to third"]
    assert restored.history[-2].text == "third"  # answered: not marked as interrupted
    assert [u["content"]["text"] for u in restored.replay] == ["first", "second"]
    store.close()


async def test_a_compaction_is_kept_as_one_final_update_with_its_summary(tmp_path: Path) -> None:
    store, recorder = await recorded(tmp_path)
    recorder.shown(compaction_update("c1", "in_progress"))
    for text in ("Goal: a parser.\n\n", "Next: tests."):
        content = {"type": "text", "text": text}
        recorder.shown(
            {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": content}
        )
    recorder.shown(compaction_update("c1", "completed"))
    await recorder.committed()
    (final,) = restore(store.events("s"), store.blob).replay
    assert final["status"] == "completed"
    assert final["summary"] == [{"type": "text", "text": "Goal: a parser.\n\nNext: tests."}]
    card, update = as_card(final)
    assert card["sessionUpdate"] == "tool_call" and card["kind"] == "think"
    assert update["content"][0]["content"]["text"] == "Goal: a parser.\n\nNext: tests."
    store.close()
