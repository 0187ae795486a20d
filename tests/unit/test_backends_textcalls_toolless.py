"""A local model that cannot call tools: the user is told once, the model is never offered the
tools, and a task about the user's files is answered honestly instead of by the model's guess."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_server.backends.local.backend import LocalBackend
from acp_server.backends.textcalls import toolless
from acp_server.backends.textcalls.recover import CallRecovery
from acp_server.messages import (
    Event,
    Finish,
    ModelRequest,
    Notice,
    TextDelta,
    ToolSpec,
    text_message,
)
from tests.unit.test_backends_local_gguf import WITHOUT_TOOLS, write_gguf

LIST = ToolSpec("list_directory", "List a directory", {"type": "object"})


def ask(text: str, *, tools: bool = True) -> ModelRequest:
    return ModelRequest(
        (text_message("user", text),), (LIST,) if tools else (), "You are an agent."
    )


@pytest.mark.parametrize(
    "text",
    [
        "List the files here",
        "read README.md",
        "What does main.py do?",
        "run the tests",
        "fix the bug",
    ],
)
def test_tasks_about_files_and_commands_are_recognised(text: str) -> None:
    assert toolless.about_the_workspace(ask(text))


@pytest.mark.parametrize(
    "text",
    ["Say hello in one short sentence.", "What is a monad?", "Hi", "Write a short poem here"],
)
def test_other_requests_are_left_to_the_model(text: str) -> None:
    assert not toolless.about_the_workspace(ask(text))


def test_the_model_is_not_offered_tools_and_is_told_it_has_none() -> None:
    request = toolless.without_tools(ask("Hi"))
    assert request.tools == ()
    assert request.system.startswith("You are an agent.") and "no tools" in request.system


async def test_a_task_about_files_is_answered_honestly_once_without_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_SERVER_DATA_DIR", str(tmp_path / "data"))
    backend = LocalBackend(write_gguf(tmp_path / "smol.gguf", WITHOUT_TOOLS), {}, {})
    assert not backend.calls_tools
    events: list[Event] = [e async for e in backend.stream(ask("List the files here"))]
    assert isinstance(events[0], Notice) and "cannot call tools" in events[0].text
    assert events[0].severity == "warning"
    assert isinstance(events[1], TextDelta) and "cannot use tools" in events[1].text
    assert "acp-server setup" in events[1].text
    assert events[2:] == [Finish("stop")]
    assert not (tmp_path / "data" / "local-model.log").exists()  # no model was started


# --- a model with a tool template that never writes a call the agent can read ------------------

UNKNOWN = '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>'  # not offered
GOOD = '<tool_call>{"name": "list_directory", "arguments": {}}</tool_call>'


async def replies(recovery: CallRecovery, *texts: str) -> None:
    """Each text as one reply of the model (asked again after a bad call, it says the same)."""
    for text in texts:

        async def send(request: ModelRequest, text: str = text) -> AsyncIterator[Event]:
            yield TextDelta(text)
            yield Finish("stop")

        async for _ in recovery.stream(send, ask("List the files here")):
            pass


async def test_a_model_that_only_writes_unreadable_calls_is_given_up_on() -> None:
    recovery = CallRecovery()
    await replies(recovery, UNKNOWN)
    assert not toolless.never_calls(recovery)  # once may be a slip
    await replies(recovery, "Sure.", UNKNOWN)
    assert recovery.lost == toolless.LOST_LIMIT and toolless.never_calls(recovery)


async def test_a_model_that_once_wrote_a_readable_call_keeps_its_tools() -> None:
    recovery = CallRecovery()
    await replies(recovery, GOOD, UNKNOWN, UNKNOWN, UNKNOWN)
    assert recovery.usable == 1 and recovery.lost == 3
    assert not toolless.never_calls(recovery)


def test_the_notice_says_what_changed_and_what_to_do() -> None:
    text = toolless.NEVER_CALLED_NOTICE.format(name="qwen", lost=2)
    assert "not offered tools" in text and "acp-server setup" in text and "restarts" in text
