"""The compaction stages one by one: prune, the summary request, rebuild, truncation, clipping."""

from __future__ import annotations

import json

from acp_server.context.prune import PRUNED_PREFIX, prune_tool_outputs
from acp_server.context.state import (
    ACK,
    NO_SUMMARY,
    STATE_KEY,
    KeptState,
    collect,
    is_state_message,
    rebuild,
)
from acp_server.context.summary import SUMMARY_SYSTEM, cut_middle, summary_request, transcript
from acp_server.context.tokens import Estimator
from acp_server.context.truncate import clip_result, tail_start, truncate
from acp_server.messages import (
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    history_problems,
    text_message,
)

EST = Estimator()
PLAN = {
    "entries": [
        {"content": "Read the parser", "status": "completed"},
        {"content": "Fix the off-by-one in tokenize()", "status": "in_progress"},
    ]
}


def call(call_id: str, name: str, **args: object) -> Message:
    return Message("assistant", tool_calls=(ToolCall(call_id, name, dict(args)),))


def result(call_id: str, text: str) -> Message:
    return text_message("tool", text, tool_call_id=call_id)


def read_turn(n: int, chars: int = 6000) -> list[Message]:
    return [
        text_message("user", f"request {n}"),
        call(f"r{n}", "read_file", path=f"src/f{n}.py"),
        result(f"r{n}", f"content of f{n}\n" + "line\n" * (chars // 5)),
        text_message("assistant", f"answer {n}"),
    ]


def session(turns: int) -> list[Message]:
    return [m for n in range(turns) for m in read_turn(n)]


# ----- prune ------------------------------------------------------------------------------------


def test_prune_replaces_old_outputs_with_a_note_and_keeps_the_last_two_exchanges() -> None:
    hist = session(6)
    pruned = prune_tool_outputs(hist, EST, keep_tokens=0)
    assert pruned is not hist and len(pruned) == len(hist)
    outputs = [m for m in pruned if m.role == "tool"]
    assert all(m.text.startswith(PRUNED_PREFIX) for m in outputs[:4])
    assert outputs[4:] == [m for m in hist if m.role == "tool"][4:]  # last two exchanges
    note = outputs[0].text
    assert '"path": "src/f0.py"' in note and "read_file" in note and "again" in note
    assert "\n" not in note
    assert history_problems(pruned) == []


def test_prune_keeps_the_newest_outputs_within_keep_tokens() -> None:
    hist = session(6)
    one_output = EST.message(hist[2])[0]
    pruned = prune_tool_outputs(hist, EST, keep_tokens=one_output * 2)
    outputs = [m.text.startswith(PRUNED_PREFIX) for m in pruned if m.role == "tool"]
    assert outputs == [True, True, False, False, False, False]


def test_prune_never_changes_its_input_or_small_outputs() -> None:
    hist = [*session(4), text_message("user", "x")]
    hist[2] = result("r0", "ok")
    before = list(hist)
    pruned = prune_tool_outputs(hist, EST, keep_tokens=0)
    assert hist == before and all(a is b for a, b in zip(hist, before, strict=True))
    assert pruned[2].text == "ok"  # a note would be longer than the output
    assert prune_tool_outputs(pruned, EST, keep_tokens=0) == pruned  # notes are not re-noted


# ----- the summary request ----------------------------------------------------------------------


def rich_history() -> list[Message]:
    image = ImagePart("aGVsbG8=" * 1000, "image/png")
    return [
        Message("user", (TextPart("Fix the parser; never touch tests/."), image)),
        call("p1", "update_plan", **PLAN),
        result("p1", "Plan updated: 2 entries (1 completed)."),
        call("c1", "read_file", path="src/parser.py"),
        result("c1", "def tokenize():\n    return []\n"),
        call("c2", "edit_file", path="src/parser.py", edits=[{"old_text": "a", "new_text": "b"}]),
        result("c2", "Edited src/parser.py"),
        text_message("assistant", "Fixed it."),
    ]


def test_the_summary_request_is_plain_text_without_tools() -> None:
    request = summary_request(rich_history(), EST, budget=6000, reply_tokens=500)
    assert request.tools == ()
    assert request.system == SUMMARY_SYSTEM
    assert request.max_tokens == 500
    assert [m.role for m in request.messages] == ["user"]
    only = request.messages[0]
    assert not only.tool_calls and only.tool_call_id is None
    assert all(isinstance(p, TextPart) for p in only.content)
    text = only.text
    assert 'Assistant called read_file({"path": "src/parser.py"})' in text
    assert "Tool result: def tokenize():" in text
    assert "User: Fix the parser; never touch tests/. [attached an image]" in text
    assert "aGVsbG8=" not in text
    for section in ("Goal", "instructions and constraints", "Decisions", "Progress", "Next step"):
        assert section in text


def test_the_summary_request_carries_the_focus() -> None:
    request = summary_request(rich_history(), EST, 6000, 500, focus="the parser bug")
    assert "focus on: the parser bug" in request.messages[0].text


def test_the_summary_request_fits_its_budget_by_cutting_the_middle() -> None:
    hist = session(40)
    request = summary_request(hist, EST, budget=3000, reply_tokens=500)
    tokens = EST.text(request.system) + EST.messages(request.messages)
    assert tokens <= 3000
    text = request.messages[0].text
    assert "User: request 0" in text  # how it started
    assert "Assistant: answer 39" in text  # where it stands
    assert "lines (" in text and "omitted here" in text


def test_cut_middle_keeps_whole_lines_from_both_ends() -> None:
    text = "\n".join(f"line {n:03}" for n in range(200))
    cut = cut_middle(text, 300)
    assert len(cut) <= 300
    lines = cut.split("\n")
    assert lines[0] == "line 000" and lines[-1] == "line 199"
    kept = [line for line in lines if line.startswith("line ")]
    assert all(line in text.split("\n") for line in kept)
    assert cut_middle(text, 10_000) == text


def test_cut_middle_cuts_inside_one_enormous_line() -> None:
    cut = cut_middle("a" * 5000 + "b" * 5000, 400)
    assert len(cut) <= 400 and cut.startswith("a") and cut.endswith("b")


def test_cut_middle_keeps_the_end_of_a_final_line_without_newlines() -> None:
    text = "\n".join(f"line {n:03}" for n in range(50)) + "\nUser: " + "x" * 3000 + " LAST WORDS"
    cut = cut_middle(text, 600)
    assert len(cut) <= 600
    assert cut.startswith("line 000") and cut.endswith(" LAST WORDS")
    assert "omitted here" in cut


def test_the_transcript_writes_tool_shapes_as_prose() -> None:
    text = transcript(rich_history())
    assert "tool_call" not in text and '"role"' not in text
    assert "Assistant called update_plan(" in text


# ----- state and rebuild ------------------------------------------------------------------------


def test_collect_takes_plan_and_files_from_the_tool_calls() -> None:
    hist = [*rich_history(), *read_turn(1)]
    state = collect(hist, len(hist), user_chars=10_000)
    assert state.plan == tuple(PLAN["entries"])
    assert state.files_read == ("src/parser.py", "src/f1.py")
    assert state.files_edited == ("src/parser.py",)
    assert state.user_messages[-1] == "request 1"
    assert "Fix the parser; never touch tests/." in state.user_messages[0]


def test_collect_keeps_the_newest_user_messages_within_the_budget() -> None:
    hist = [text_message("user", f"{n}" * 100) for n in range(10)]
    state = collect(hist, len(hist), user_chars=250)
    assert state.user_messages == ("8" * 100, "9" * 100)
    huge = [text_message("user", "z" * 5000)]
    assert collect(huge, 1, user_chars=10).user_messages == ("z" * 5000,)  # the latest always


def test_collect_keeps_the_most_recently_touched_files_and_counts_the_others() -> None:
    paths = [f"src/{'deep/' * 20}module_{n}.py" for n in range(12)]
    hist = [m for n, p in enumerate(paths) for m in (call(f"r{n}", "read_file", path=p),)]
    hist.append(call("again", "read_file", path=paths[0]))  # touched again: the newest now
    state = collect(hist, len(hist), user_chars=1000)
    assert state.files_read[-1] == paths[0]
    assert sum(len(p) for p in state.files_read) <= 500
    assert state.files_left_out == 12 - len(state.files_read)
    text = rebuild(hist, len(hist), None, 1000)[0].text
    assert f"({state.files_left_out:,} files touched earlier are not listed.)" in text


def test_collect_cuts_an_earlier_huge_message_but_never_the_current_prompt() -> None:
    huge = "z" * 5000
    hist = [text_message("user", huge), text_message("assistant", "ok")]
    (kept,) = collect([*hist, text_message("user", "go on")], 2, user_chars=200).user_messages
    assert len(kept) < 400 and kept.startswith("z") and "characters cut" in kept
    assert collect(hist, 2, user_chars=200).user_messages == (huge,)  # the current prompt


def test_rebuild_puts_the_state_before_the_tail() -> None:
    hist = [*rich_history(), *read_turn(1)]
    split = 8  # the tail starts at "request 1"
    out = rebuild(hist, split, "The user wants the parser fixed.", user_chars=10_000)
    assert is_state_message(out[0]) and out[0].role == "user"
    assert out[1].role == "assistant" and out[1].text == ACK  # roles keep alternating
    assert out[2:] == hist[split:]
    text = out[0].text
    assert "The user wants the parser fixed." in text
    assert "Fix the parser; never touch tests/." in text
    assert "Fix the off-by-one in tokenize()" in text
    assert "src/parser.py" in text
    assert history_problems(out) == []
    assert KeptState.from_json(out[0].extra[STATE_KEY]).files_edited == ("src/parser.py",)


def test_rebuild_never_starts_the_tail_with_a_tool_result() -> None:
    hist = rich_history()
    out = rebuild(hist, 2, None, user_chars=10_000)  # 2 is a tool result
    assert out[1].role != "tool"
    assert history_problems(out) == []
    assert NO_SUMMARY in out[0].text


def test_a_second_compaction_carries_the_first_ones_state() -> None:
    hist = [*rich_history(), *read_turn(1)]
    first = rebuild(hist, 8, "first summary", user_chars=10_000)
    later = [*first, *read_turn(2), *read_turn(3)]
    second = rebuild(later, len(later) - 4, "second summary", user_chars=10_000)
    text = second[0].text
    assert "second summary" in text
    assert "Fix the parser; never touch tests/." in text  # from the first state
    assert "request 1" in text and "request 2" in text
    for path in ("src/parser.py", "src/f1.py", "src/f2.py"):
        assert path in text
    assert "Fix the off-by-one in tokenize()" in text


def test_an_empty_plan_replaces_the_old_one() -> None:
    hist = [*rich_history(), call("p2", "update_plan", entries=[]), result("p2", "ok")]
    assert collect(hist, len(hist), 1000).plan == ()


# ----- truncation and clipping --------------------------------------------------------------------


def test_tail_start_keeps_whole_rounds() -> None:
    hist = session(5)
    start = tail_start(hist, EST.messages(hist[-4:]) + 5, EST)
    assert start == len(hist) - 4
    assert tail_start(hist, 1, EST) == len(hist)


def test_truncate_keeps_the_newest_rounds_behind_a_readable_placeholder() -> None:
    hist = [*rich_history(), *session(10), text_message("user", "the latest request")]
    out = truncate(hist, 4000, EST, user_chars=2000)
    assert EST.messages(out) <= 4000
    assert "Earlier messages were removed" in out[0].text
    assert out[-1] is hist[-1]
    assert history_problems(out) == []
    assert "Fix the off-by-one in tokenize()" in out[0].text
    assert "src/parser.py" in out[0].text


def test_truncate_clips_the_newest_round_when_even_it_does_not_fit() -> None:
    hist = [text_message("user", "read the big file"), *read_turn(1, chars=60_000)[1:3]]
    out = truncate(hist, 3000, EST, user_chars=2000)
    assert EST.messages(out) <= 3000
    assert history_problems(out) == []
    assert out[-1].role == "tool" and "cut here" in out[-1].text
    assert "read the big file" in out[0].text


def test_truncate_never_condenses_the_current_prompt() -> None:
    prompt = text_message("user", "Please review this paste:\n" + "paste line\n" * 600)
    hist = [*session(3), prompt]
    out = truncate(hist, 500, EST, user_chars=400)
    assert out[-1] is prompt  # whole, as its own message, not folded into the state
    assert prompt.text not in out[0].text
    assert history_problems(out) == []


def test_clip_result_keeps_head_and_tail_and_says_how_to_read_the_rest() -> None:
    text = "\n".join(f"line {n}" for n in range(10_000))
    clipped = clip_result(text, 500, EST, "read_file")
    assert EST.text(clipped) <= 500
    assert clipped.startswith("line 0\n") and clipped.endswith("line 9999")
    assert "cut here" in clipped and "line` and `limit`" in clipped
    assert clip_result("short", 500, EST) == "short"
    assert "narrowed" in clip_result(text, 500, EST, "run_command")


def test_the_state_message_is_json_safe() -> None:
    out = rebuild(rich_history(), 3, "s", 1000)
    json.dumps(out[0].extra)
