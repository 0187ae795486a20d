"""The agent loop on what a small local model really wrote (tests/fixtures/local_replies): the
OpenAI-compatible backend serves the recorded replies over a mock transport, the real toolbox
runs the calls recovered from them, and the guards for small models are checked: a call that
repeats the one just answered is not run again (an edit not made twice), a reply that only
echoes the tool result is never the answer, and a reply that looks like a call but is none says
that nothing ran."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_server.agent.guards import REPEATED_RESULT, repeated
from acp_server.agent.history import History
from acp_server.agent.loop import StopReason, Turn, run_turn
from acp_server.backends._http import RetryPolicy
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.textcalls.recover import ECHO_EXPLANATION
from acp_server.messages import Message, ToolCall, history_problems, text_message
from acp_server.permissions import Permissions, RuleStore
from acp_server.session.voice import Voice
from acp_server.tools.defaults import default_tools
from acp_server.tools.toolbox import Toolbox
from acp_server.updates import Update
from tests.support.fake_editor import FakeEditor, InProcessClient

FIXTURES = Path(__file__).parents[1] / "fixtures" / "local_replies"
RECORDED_CWD = "/home/user/project"  # the working directory record.py told the model
README = "# invoice\n\nComputes invoice totals with tax for small shops.\n"
ANSWER = "The project computes invoice totals with tax for small shops."
# The model asking again for the call just answered: its recorded call, played once more (issue
# 31 saw the 1.5B do this; these recordings did not catch it).
REPEAT = "qwen15-read.txt"
ECHO = "documented/qwen-tool-response-echo.txt"  # hand-written in the template's markup


def recorded(name: str, cwd: Path) -> str:
    """A recorded reply, its paths moved from the recording's folder to this test's."""
    return (FIXTURES / name).read_text("utf-8").replace(RECORDED_CWD, str(cwd))


def sse(content: str) -> httpx.Response:
    pieces = [content[i : i + 5] for i in range(0, len(content), 5)]  # a few tokens a chunk
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    frames = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=frames)


@dataclass
class Model:
    """Serves one reply's content per request; keeps the request bodies."""

    replies: list[str]
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return sse(self.replies.pop(0))


@dataclass
class Rig:
    turn: Turn
    model: Model
    seen: list[Update]
    told: list[str]

    async def run(self) -> StopReason:
        stop = await run_turn(self.turn)
        assert history_problems(self.turn.history) == []
        return stop

    def shown(self) -> str:
        return "".join(
            u["content"]["text"] for u in self.seen if u["sessionUpdate"] == "agent_message_chunk"
        )

    def results(self) -> list[str]:
        return [m.text for m in self.turn.history if m.role == "tool"]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Callable[..., Rig]]:
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    made: list[OpenAIBackend] = []

    def make(
        *replies: str,
        prompt: str = "Read README.md and tell me what it does.",
        tools: tuple[str, ...] = (),
    ) -> Rig:
        model = Model(list(replies))
        backend = OpenAIBackend(
            "http://127.0.0.1:9/v1",
            "qwen15",
            transport=httpx.MockTransport(model),
            retry=RetryPolicy(attempts=1),
        )
        made.append(backend)
        toolbox = Toolbox(
            [t for t in default_tools() if not tools or t.name in tools],
            cwd=tmp_path,
            roots=(tmp_path,),
            client=InProcessClient(FakeEditor(fs=False, terminal=False)),
            permissions=Permissions(RuleStore(tmp_path, tmp_path / "data"), "bypass"),
        )
        seen: list[Update] = []
        told: list[str] = []
        turn = Turn(
            backend=backend,
            history=History([text_message("user", prompt)]),
            emit=seen.append,
            voice=Voice(lambda u: sort(u, told, seen), notices=True),
            tools=toolbox,
            max_requests=8,
        )
        return Rig(turn, model, seen, told)

    yield make
    for backend in made:
        await backend.aclose()


async def test_the_recorded_fenced_call_runs_and_is_never_the_answer(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    r = rig(recorded("qwen15-read.txt", tmp_path), ANSWER)
    assert await r.run() == "end_turn"
    assert README.strip() in r.results()[0]
    assert r.shown() == ANSWER  # the fenced call was not shown, nor kept as text
    assert [m.role for m in r.turn.history] == ["user", "assistant", "tool", "assistant"]
    assert r.turn.history[1].text == "" and r.turn.history[1].tool_calls[0].name == "read_file"


async def test_the_same_call_right_after_its_result_is_not_run_again(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    again = recorded(REPEAT, tmp_path)
    r = rig(recorded("qwen15-read.txt", tmp_path), again, ANSWER)
    assert await r.run() == "end_turn"
    first, second = r.results()
    assert README.strip() in first
    assert second == REPEATED_RESULT.format(name="read_file")
    told = r.model.bodies[2]["messages"][-1]
    assert told["role"] == "tool" and "Answer the user now" in told["content"]
    assert r.shown() == ANSWER


async def test_the_same_call_after_another_one_runs(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    read = recorded("qwen15-read.txt", tmp_path)
    r = rig(read, recorded("qwen15-list.txt", tmp_path), read, ANSWER)
    assert await r.run() == "end_turn"
    results = r.results()
    assert README.strip() in results[0] and "README.md" in results[1]
    assert README.strip() in results[2]  # not right after its own result: run


async def test_a_reply_that_only_echoes_the_tool_result_is_not_the_answer(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    r = rig(recorded("qwen15-read.txt", tmp_path), recorded(ECHO, tmp_path), ANSWER)
    assert await r.run() == "end_turn"
    assert r.shown() == ANSWER and "tool_response" not in r.shown()
    asked = r.model.bodies[2]["messages"][-1]
    assert asked == {"role": "user", "content": ECHO_EXPLANATION}
    assert any("repeated the tool result" in t for t in r.told)
    assert r.turn.history[-1].text == ANSWER


async def test_an_echo_twice_ends_the_turn_with_no_answer_shown(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    echo = recorded(ECHO, tmp_path)
    r = rig(recorded("qwen15-read.txt", tmp_path), echo, echo)
    await r.run()
    assert r.shown().strip().startswith("The model sent an empty reply")
    assert r.turn.failure is not None and "tool_response" not in r.shown()


async def test_a_turn_ending_on_a_call_that_was_not_recovered_says_so(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    # Only read_file is offered: the recorded call to list_directory names no offered tool.
    r = rig(
        recorded("qwen15-list.txt", tmp_path), prompt="List the files here.", tools=("read_file",)
    )
    assert await r.run() == "end_turn"
    assert r.results() == [] and '"list_directory"' in r.shown()
    assert any("looks like a tool call" in t and "nothing was run" in t for t in r.told)


def _assistant(*calls: ToolCall) -> Message:
    return Message(role="assistant", content=(), tool_calls=calls)


def _result(call: ToolCall) -> Message:
    return text_message("tool", "result", tool_call_id=call.id)


def test_a_repeat_is_the_same_name_and_arguments_as_the_round_just_answered() -> None:
    read = ToolCall("c1", "read_file", {"path": "a.py"})
    same = ToolCall("c2", "read_file", {"path": "a.py"})
    other = ToolCall("c3", "read_file", {"path": "b.py"})
    ask = text_message("user", "go")
    assert repeated(same, [ask, _assistant(read), _result(read), _assistant(same)])
    assert not repeated(other, [ask, _assistant(read), _result(read), _assistant(other)])
    assert not repeated(read, [ask, _assistant(read)])  # the first round
    between = [ask, _assistant(read), _result(read), _assistant(other), _result(other)]
    assert not repeated(same, [*between, _assistant(same)])
    # A new prompt in between: asking again is the user's wish.
    assert not repeated(same, [ask, _assistant(read), _result(read), ask, _assistant(same)])


async def test_a_recorded_answer_with_a_call_to_no_offered_tool_is_shown_and_noted(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    # After the result, the 1.5B answered with prose around a fenced "call" to `invoice`.
    r = rig(recorded("qwen15-read.txt", tmp_path), recorded("qwen15-after-result.txt", tmp_path))
    assert await r.run() == "end_turn"
    assert len(r.results()) == 1
    assert '"name": "invoice"' in r.shown() and "feel free to ask" in r.shown()
    assert any('no tool named "invoice"' in t and "nothing was run" in t for t in r.told)


def _tool_call(name: str, arguments: dict[str, Any]) -> str:
    """A reply in the model's own call markup (the form its template teaches)."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def test_an_edit_sent_again_right_after_it_was_made_is_not_made_twice(
    rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """The 1.5B sent its successful edit of config.json again, seven times. An edit whose new
    text holds its old text would be made again each time: it is held back like a repeated
    read, and so is the same write."""
    (tmp_path / "greet.py").write_text('print("hi")\n', encoding="utf-8")
    edit = _tool_call(
        "edit_file",
        {"path": str(tmp_path / "greet.py"), "edits": [{"old_text": "hi", "new_text": "hi there"}]},
    )
    r = rig(edit, edit, "Done.", prompt='In greet.py, change "hi" to "hi there".')
    assert await r.run() == "end_turn"
    assert (tmp_path / "greet.py").read_text("utf-8") == 'print("hi there")\n'
    made, again = r.results()
    assert made.startswith("Applied 1 edit to greet.py")
    assert again == REPEATED_RESULT.format(name="edit_file")
    write = _tool_call("write_file", {"path": "notes.txt", "content": "ship it"})
    r = rig(write, write, "Done.", prompt="Create notes.txt containing: ship it")
    assert await r.run() == "end_turn"
    assert r.results()[1] == REPEATED_RESULT.format(name="write_file")
    assert (tmp_path / "notes.txt").read_text("utf-8") == "ship it"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("command_output", {"id": "job1"}), ("run_command", {"command": "git status"})],
)
def test_asking_again_for_what_changes_by_itself_is_never_held_back(
    name: str, arguments: dict[str, Any]
) -> None:
    """Reading a background command's output again, or running a command again, is how a model
    waits for something: only reading, searching and changing files are held back."""
    first, again = ToolCall("c1", name, arguments), ToolCall("c2", name, dict(arguments))
    ask = text_message("user", "go")
    assert not repeated(again, [ask, _assistant(first), _result(first), _assistant(again)])


def sort(update: Update, told: list[str], seen: list[Update]) -> None:
    """The turn's notices as their text in `told`, what else its voice says in `seen`."""
    if update["sessionUpdate"] == "notice":
        told.append(update["title"])
    else:
        seen.append(update)
