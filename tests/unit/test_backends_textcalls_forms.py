"""Tool calls recovered from what local models really write (tests/fixtures/local_replies: the
recorded replies of Qwen2.5-Coder-1.5B, and replies written by the documented formats of the
forms it does not produce), and JSON that is not a call to an offered tool left as text."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from acp_server.backends.textcalls.forms import read_block
from acp_server.backends.textcalls.scanner import InlineCallScanner
from acp_server.doctor.tools import tool_specs
from acp_server.messages import Event, TextDelta, ToolCallAssembler, ToolCallDelta

FIXTURES = Path(__file__).parents[1] / "fixtures" / "local_replies"
# The tools the recording offered (record.py), with the schemas the model saw.
OFFERED_SPECS = {
    spec.name: spec
    for spec in tool_specs()
    if spec.name in ("read_file", "list_directory", "grep", "write_file", "run_command")
}
OFFERED = {name: spec.parameters for name, spec in OFFERED_SPECS.items()}
README = [("read_file", {"path": "README.md"})]
DOCUMENTED: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "hermes.txt": README,
    "qwen-tools-tag.txt": README,
    "llama3-function.txt": README,
    "llama3-python-tag.txt": README,
    "mistral.txt": README,
    "mistral-args.txt": README,
}


def scan(
    deltas: list[str], offered: dict[str, Any] = OFFERED
) -> tuple[InlineCallScanner, list[Event]]:
    numbers = itertools.count()
    scanner = InlineCallScanner(lambda: f"call_recovered_{next(numbers)}", offered)
    out: list[Event] = []
    for delta in deltas:
        out += scanner.feed(delta)
    return scanner, out + scanner.end()


def visible(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assembler.add(event)
    return [(c.name, c.arguments) for c in assembler.calls("x")]


def pieces(text: str) -> list[list[str]]:
    """The reply in one delta, and one character per delta (the worst a stream can do)."""
    return [[text], list(text)]


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_documented_form_is_recovered_and_its_markup_hidden(name: str) -> None:
    text = (FIXTURES / "documented" / name).read_text("utf-8")
    for deltas in pieces(f"Let me read it.\n{text}"):
        scanner, events = scan(deltas)
        assert calls(events) == DOCUMENTED[name], deltas[:1]
        assert visible(events).strip() == "Let me read it."
        assert scanner.problems == [] and scanner.unread == []


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```',
        '```\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```',
        '{"name": "read_file", "arguments": {"path": "README.md"}}',
        '  {"name": "read_file", "parameters": {"path": "README.md"}}\n',
        '{"type": "function", "function": {"name": "read_file", "arguments": "{\\"path\\": '
        '\\"README.md\\"}"}}',
    ],
)
def test_a_fenced_or_bare_call_to_an_offered_tool_is_recovered(text: str) -> None:
    for deltas in pieces(text):
        _, events = scan(deltas)
        assert calls(events) == README and visible(events).strip() == ""


def test_a_recorded_call_with_a_python_triple_quoted_string_is_recovered() -> None:
    """Qwen2.5-Coder-1.5B's write_file call in the task benchmark ("add a test", printed by
    `acp-server run`): the content as a Python \"\"\"string\"\"\", so not JSON; it was shown as
    the answer and nothing was written."""
    text = (FIXTURES / "qwen15-bench-triple-quotes.txt").read_text("utf-8")
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        [(name, arguments)] = calls(events)
        assert name == "write_file" and arguments["path"].endswith("tests/test_mathx.py")
        assert arguments["content"].startswith("\nimport pytest\n\nfrom mathx import double\n")
        assert "    assert double(-3.5) == -7.0\n" in arguments["content"]
        assert visible(events).strip() == "" and scanner.problems == []


def test_a_recorded_call_with_an_empty_optional_string_is_recovered_without_it() -> None:
    """Qwen2.5-Coder-1.5B's grep in the task benchmark ("rename a function used in two files"):
    it filled every parameter, `glob` with "", which grep's schema refuses (a non-empty pattern
    or nothing); the call was refused twice and nothing ran."""
    text = (FIXTURES / "qwen15-bench-empty-glob.txt").read_text("utf-8")
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        [(name, arguments)] = calls(events)
        assert name == "grep" and arguments["pattern"] == "old_name" and "glob" not in arguments
        assert arguments["before"] == 50 and arguments["files_only"] is True  # the rest kept
        assert visible(events).strip() == "" and scanner.problems == []


def test_a_recorded_call_giving_options_the_compact_profile_does_not_show_is_recovered() -> None:
    """The compact profile (small windows) shows grep without the options that only shape its
    result; the 1.5B may still give them, as it did when it saw them: the call is recovered
    whole, and the tool decides."""
    from acp_server.context.profile import OPTIONS, shorten

    compact = {name: shorten(spec).parameters for name, spec in OFFERED_SPECS.items()}
    assert "files_only" not in compact["grep"]["properties"]
    text = (FIXTURES / "qwen15-bench-empty-glob.txt").read_text("utf-8")
    for deltas in pieces(text):
        scanner, events = scan(deltas, compact)
        [(name, arguments)] = calls(events)
        assert name == "grep" and arguments["pattern"] == "old_name"
        assert set(OPTIONS["grep"]) & set(arguments) >= {"before", "files_only"}
        assert scanner.problems == []
    unknown = '<tool_call>{"name": "grep", "arguments": {"pattern": "x", "colour": 1}}</tool_call>'
    _, events = scan([unknown], compact)
    assert calls(events) == [("grep", {"pattern": "x", "colour": 1})]  # the tool refuses it


def test_an_empty_string_is_dropped_only_where_it_can_only_mean_not_given() -> None:
    properties: dict[str, Any] = {
        "need": {"type": "string", "minLength": 1},
        "opt": {"type": "string", "minLength": 1},
        "free": {"type": "string"},
        "odd": {"type": "string", "minLength": "1"},
    }
    offered = {"tool": {"type": "object", "required": ["need"], "properties": properties}}
    given = {"need": "x", "opt": "", "free": "", "odd": ""}
    _, events = scan([json.dumps({"name": "tool", "arguments": given})], offered)
    # An odd schema (an MCP server's) neither crashes nor loses the value: the tool judges it.
    assert calls(events) == [("tool", {"need": "x", "free": "", "odd": ""})]
    del properties["odd"]
    scanner, events = scan([json.dumps({"name": "tool", "arguments": {"need": ""}})], offered)
    assert calls(events) == [] and "need" in scanner.problems[0]  # required: still refused


def test_triple_quotes_inside_valid_json_are_left_as_they_are() -> None:
    content = json.dumps('x = """doc"""')
    _, events = scan(
        [f'{{"name": "write_file", "arguments": {{"path": "a.py", "content": {content}}}}}']
    )
    assert calls(events) == [("write_file", {"path": "a.py", "content": 'x = """doc"""'})]


def test_a_fenced_call_keeps_the_prose_around_it() -> None:
    call = '{"name": "read_file", "arguments": {"path": "README.md"}}'
    text = f"I will read it.\n```json\n{call}\n```\nDone."
    for deltas in pieces(text):
        _, events = scan(deltas)
        assert calls(events) == README
        assert visible(events) == "I will read it.\n\nDone."


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "Ada", "age": 36}\n```',
        '```json\n{"name": "search_web", "arguments": {"q": "x"}}\n```',
        '{"name": "Ada", "age": 36}',
        "[1, 2, 3]",
        '```json\n{"name": "read_file", "arguments": {"path": "README.md"}\n```',
        "See [the docs](https://example.com) and <b>bold</b> `code` [TOOL_CALL] <tool.",
    ],
)
def test_json_that_is_not_a_call_to_an_offered_tool_stays_text(text: str) -> None:
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        assert calls(events) == [] and visible(events) == text
        assert scanner.problems == []


def test_a_call_shaped_block_naming_a_tool_not_offered_is_noted() -> None:
    text = '```json\n{"name": "list_files", "arguments": {"path": "."}}\n```'
    scanner, events = scan([text])
    assert visible(events) == text and calls(events) == []
    assert scanner.problems == []
    assert len(scanner.unread) == 1 and 'no tool named "list_files"' in scanner.unread[0]


def test_a_fenced_call_whose_arguments_do_not_fit_is_text_and_a_problem() -> None:
    text = '```json\n{"name": "grep", "arguments": {"query": "compute_total"}}\n```'
    scanner, events = scan([text])
    assert visible(events) == text and calls(events) == []
    assert len(scanner.problems) == 1 and "do not fit its schema" in scanner.problems[0]


def test_markup_naming_a_tool_not_offered_is_a_problem_and_never_shown() -> None:
    scanner, events = scan(['<function=delete_everything>{"path": "/"}</function>'])
    assert calls(events) == [] and visible(events) == ""
    assert len(scanner.problems) == 1 and "delete_everything" in scanner.problems[0]


def test_another_code_block_is_shown_as_it_streams() -> None:
    numbers = itertools.count()
    scanner = InlineCallScanner(lambda: f"c{next(numbers)}", OFFERED)
    assert scanner.feed("Here:\n```python\nprint(1)\n") == [
        TextDelta("Here:\n"),
        TextDelta("```"),
        TextDelta("python\nprint(1)\n"),
    ]
    assert visible(scanner.feed("```\nThat was it.") + scanner.end()) == "```\nThat was it."


def test_nothing_is_recovered_when_no_tools_are_offered() -> None:
    text = '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```'
    _, events = scan([text], offered={})
    assert calls(events) == [] and visible(events) == text
    assert read_block(None, '{"name": "read_file", "arguments": {}}', {}).calls == []


RECORDED: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "qwen15-list.txt": [("list_directory", {"path": "."})],
    "qwen15-read.txt": [("read_file", {"path": "/home/user/project/README.md"})],
    # It copied the glob of the schema's example: a call all the same, and a valid one.
    "qwen15-grep.txt": [
        (
            "grep",
            {
                "pattern": "compute_total",
                "path": "src/**/*.ts",
                "ignore_case": False,
                "max_results": 200,
                "before": 0,
                "after": 0,
                "files_only": True,
            },
        )
    ],
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_recorded_calls_of_the_small_model_are_recovered(name: str) -> None:
    text = (FIXTURES / name).read_text("utf-8")
    assert text.startswith("```json")  # what the 1.5B writes: a fenced JSON block
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        assert calls(events) == RECORDED[name] and visible(events) == ""
        assert scanner.problems == [] and scanner.unread == []


def test_a_recorded_json_answer_stays_text() -> None:
    text = (FIXTURES / "qwen15-json-answer.txt").read_text("utf-8")
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        assert calls(events) == [] and visible(events) == text
        assert scanner.problems == [] and scanner.unread == []


def test_a_recorded_answer_around_a_call_to_no_offered_tool_stays_text() -> None:
    text = (FIXTURES / "qwen15-after-result.txt").read_text("utf-8")
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        assert calls(events) == [] and visible(events) == text
        assert scanner.problems == [] and len(scanner.unread) == 1
        assert '"invoice"' in scanner.unread[0]


@pytest.mark.parametrize("name", ["qwen15-after-list.txt", "qwen15-after-grep.txt"])
def test_recorded_prose_after_a_result_passes_through(name: str) -> None:
    # After the list, the 1.5B told the user how to call list_directory instead of answering:
    # prose, which no guard can turn into a call; after the grep it answered well.
    text = (FIXTURES / name).read_text("utf-8")
    for deltas in pieces(text):
        scanner, events = scan(deltas)
        assert calls(events) == [] and visible(events) == text
        assert scanner.problems == [] and scanner.unread == []
