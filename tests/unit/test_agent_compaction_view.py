"""A compaction as the editor sees it: `compaction_update`s or a card, live and on replay."""

from __future__ import annotations

from acp_server.agent.compaction_view import CARD_TITLE, Shown, as_card
from acp_server.updates import Update


def test_a_client_that_shows_compactions_gets_the_summary_in_paragraphs() -> None:
    seen: list[Update] = []
    Shown(seen.append, native=True).ended("completed", "line", "Goal.\n\nNext.")
    kinds = [u["sessionUpdate"] for u in seen]
    assert kinds == ["compaction_update", *["compaction_summary_chunk"] * 2, "compaction_update"]
    assert [u["status"] for u in seen if u["sessionUpdate"] == "compaction_update"] == [
        "in_progress",
        "completed",
    ]


def test_any_other_client_gets_a_card_with_the_line() -> None:
    seen: list[Update] = []
    Shown(seen.append, native=False).ended("failed", "The compaction failed.")
    assert seen[0]["title"] == CARD_TITLE and seen[0]["kind"] == "think"
    assert seen[-1]["status"] == "failed"
    assert seen[-1]["content"][0]["content"]["text"] == "The compaction failed."


def test_a_stored_failure_replays_as_a_failed_card() -> None:
    card, update = as_card(
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "failed"}
    )
    assert card["toolCallId"] == update["toolCallId"] == "c1"
    assert update["status"] == "failed"
    assert update["content"][0]["content"]["text"] == "The compaction did not complete."
