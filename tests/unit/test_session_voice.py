"""The one way a session tells its user something: `say` and `tell`, in a turn or between."""

from __future__ import annotations

from acp_server.session.voice import Voice, live
from acp_server.updates import Update


def test_a_notice_where_the_editor_shows_them_else_a_message_in_a_turn_and_nothing_between() -> (
    None
):
    seen: list[Update] = []
    Voice(seen.append, notices=True).tell("Server down.", "error")
    Voice(seen.append, notices=False).tell("Server down.")
    Voice(seen.append, notices=False, in_turn=False).tell("dropped: nobody asked")
    assert seen[0] == {"sessionUpdate": "notice", "severity": "error", "title": "Server down."}
    assert seen[1]["sessionUpdate"] == "agent_message_chunk"
    assert seen[1]["content"]["text"] == "Server down.\n\n"
    assert len(seen) == 2


def test_say_is_an_agent_message_of_its_own() -> None:
    seen: list[Update] = []
    voice = Voice(seen.append, notices=True)
    voice.say("one")
    voice.say("two")
    assert [u["content"]["text"] for u in seen] == ["one", "two"]
    assert seen[0]["messageId"] != seen[1]["messageId"]


def test_nothing_of_a_turn_is_shown_or_recorded_after_its_end() -> None:
    recorded: list[Update] = []
    sent: list[Update] = []
    emit, end = live(recorded.append, sent.append)
    Voice(emit, notices=False).say("during")
    end()
    Voice(emit, notices=False).say("after")
    assert [u["content"]["text"] for u in sent] == ["during"] and recorded == sent
