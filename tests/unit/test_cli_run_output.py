"""How `acp-server run` finds a command's output in its tool call and keeps the end of it."""

from __future__ import annotations

from acp_server.cli.run.output import SHOWN_CHARS, SHOWN_LINES, command_output, tail


def text(value: str) -> list[dict[str, object]]:
    return [{"type": "content", "content": {"type": "text", "text": value}}]


def test_the_output_is_the_text_after_the_status_line_without_its_fence() -> None:
    assert command_output(text("Exit code 0\n```\none\ntwo\n```")) == "one\ntwo"
    assert command_output(text("Exit code 1\n(no output)")) == "(no output)"
    assert command_output([{"type": "terminal", "terminalId": "t"}]) is None
    assert command_output(None) is None


def test_the_end_is_kept_and_what_was_left_out_counted() -> None:
    lines = "\n".join(str(n) for n in range(1, 101))
    kept, left_out = tail(lines)
    assert kept == [str(n) for n in range(101 - SHOWN_LINES, 101)] and left_out == 100 - SHOWN_LINES
    assert tail("a\nb\n") == (["a", "b"], 0)


def test_long_lines_are_bounded_in_characters_too() -> None:
    kept, left_out = tail("first\n" + "x" * (SHOWN_CHARS * 2))
    assert len(kept) == 1 and kept[0].startswith("…") and len(kept[0]) <= SHOWN_CHARS + 1
    assert left_out == 1
    several = "\n".join(["y" * 300] * 15)
    kept, left_out = tail(several)
    assert sum(len(line) + 1 for line in kept) <= SHOWN_CHARS + 1 and left_out == 15 - len(kept)
