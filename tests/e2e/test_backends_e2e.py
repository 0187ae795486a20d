"""The real model backends through the real console script, against the mock LLM over TCP.

Each test starts `acp-server --model DIALECT:mock-model` with the endpoint variables pointing at
the `mock_llm` fixture, drives it over raw pipes (every frame is checked against the ACP schema
at teardown) and looks at two sides: what the editor was shown (`session/update`s and the stop
reason) and what the model server was sent (`mock_llm.requests`).

The test client does not advertise `session.notices`, so retry notices arrive as agent messages.
Retries are fast (ACP_SERVER_RETRY_BASE_DELAY=0.01); timeout faults run with a 0.5 s read
timeout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_llm import MockLLM, Recorded
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]

DIALECTS = ("openai", "ollama", "anthropic")
ATTEMPTS = 3
WINDOW = 32768  # the context window the mock reports (Anthropic's comes from a table: unknown)
ANSWER = "The quick brown fox jumps over the lazy dog, twice over and once again."
RECOVERED = "Back to normal."


def endpoint_env(dialect: str, mock: MockLLM, **extra: str) -> dict[str, str]:
    env = {
        "ACP_SERVER_RETRY_ATTEMPTS": str(ATTEMPTS),
        "ACP_SERVER_RETRY_BASE_DELAY": "0.01",
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        "OLLAMA_HOST": mock.url,
        "ANTHROPIC_BASE_URL": mock.url,
        "ANTHROPIC_API_KEY": "sk-ant-mock",
    }
    return {**env, **extra}


class Agent:
    """One server and one open session against the mock, in `cwd`."""

    def __init__(self, server: RawServer, session: str, dialect: str, mock: MockLLM) -> None:
        self.server = server
        self.session = session
        self.dialect = dialect
        self.mock = mock

    async def prompt(self, text: str = "go") -> tuple[str, list[dict[str, Any]]]:
        """(stop reason, the session/update payloads that came before the answer)."""
        params = {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]}
        req = await self.server.call("session/prompt", params)
        answer, before = await self.server.response(req, timeout=20)
        assert "result" in answer, answer
        return answer["result"]["stopReason"], updates_of(before)

    async def still_works(self) -> None:
        """The same session answers the next prompt normally."""
        self.mock.queue({"text": RECOVERED})
        stop, seen = await self.prompt("again")
        assert stop == "end_turn"
        assert message_text(seen) == RECOVERED


async def open_agent(
    server_factory: Start, mock: MockLLM, dialect: str, cwd: Path, **env: str
) -> Agent:
    mock.set(context_length=WINDOW)
    server = await server_factory(
        "--model", f"{dialect}:mock-model", env=endpoint_env(dialect, mock, **env)
    )
    session = await server.handshake(str(cwd))
    return Agent(server, session, dialect, mock)


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def chunks(seen: list[dict[str, Any]], kind: str = "agent_message_chunk") -> list[str]:
    return [u["content"]["text"] for u in seen if u["sessionUpdate"] == kind]


def message_text(seen: list[dict[str, Any]]) -> str:
    return "".join(chunks(seen))


def replies(seen: list[dict[str, Any]]) -> dict[str | None, str]:
    """messageId -> the text of that agent message (None: messages without an id)."""
    out: dict[str | None, str] = {}
    for u in seen:
        if u["sessionUpdate"] == "agent_message_chunk":
            key = u.get("messageId")
            out[key] = out.get(key, "") + u["content"]["text"]
    return out


def tool_results(dialect: str, request: Recorded) -> dict[str, str]:
    """Tool call id -> result text, as the follow-up request carried them to the model."""
    out: dict[str, str] = {}
    for message in request.json["messages"]:
        if dialect in ("openai", "ollama") and message["role"] == "tool":
            out[message["tool_call_id"]] = message["content"]
        elif dialect == "anthropic" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    if isinstance(content, list):
                        content = "".join(part.get("text", "") for part in content)
                    out[block["tool_use_id"]] = content
    return out


def assert_no_markup(text: str) -> None:
    assert "<" not in text and ">" not in text, text


# ----- the happy paths, per dialect -------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_text_streams_in_order(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    # Deltas a few ms apart arrive as chunks of their own (a burst may share one chunk).
    mock_llm.queue({"text": ANSWER, "delay_ms": 5})
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    pieces = chunks(seen)
    assert len(pieces) >= 3, pieces
    assert "".join(pieces) == ANSWER
    assert len(replies(seen)) == 1  # one message, one messageId
    assert chunks(seen, "agent_thought_chunk") == []


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_reasoning_arrives_as_thought_chunks(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    thought = "First I consider the question, then I weigh the options."
    mock_llm.queue({"thought": thought, "text": "Forty-two.", "delay_ms": 5})
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    assert "".join(chunks(seen, "agent_thought_chunk")) == thought
    assert len(chunks(seen, "agent_thought_chunk")) > 1
    assert message_text(seen) == "Forty-two."
    kinds = [u["sessionUpdate"] for u in seen if u["sessionUpdate"].startswith("agent_")]
    assert kinds.index("agent_message_chunk") > max(
        i for i, k in enumerate(kinds) if k == "agent_thought_chunk"
    )


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_parallel_tool_calls(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    (tmp_path / "a.txt").write_text("alpha contents\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("beta contents\n", encoding="utf-8")
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    prefix = "toolu" if dialect == "anthropic" else "call"
    ids = [f"{prefix}_first", f"{prefix}_second"]
    mock_llm.queue(
        {
            "text": "Reading both.",
            "tool_calls": [
                {"id": ids[0], "name": "read_file", "arguments": {"path": "a.txt"}},
                {"id": ids[1], "name": "read_file", "arguments": {"path": "b.txt"}},
            ],
            "parallel": True,
            "ollama_ids": True,
        },
        {"text": "Both read."},
    )
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    calls = [u for u in seen if u["sessionUpdate"] == "tool_call"]
    assert [(c["toolCallId"], c["rawInput"]) for c in calls] == [
        (ids[0], {"path": "a.txt"}),
        (ids[1], {"path": "b.txt"}),
    ]
    finals = {
        u["toolCallId"]: u["status"]
        for u in seen
        if u["sessionUpdate"] == "tool_call_update" and u.get("status")
    }
    assert finals == {ids[0]: "completed", ids[1]: "completed"}
    assert message_text(seen) == "Reading both.Both read."

    first, follow_up = mock_llm.chat_requests
    assert first.json["tools"]
    results = tool_results(dialect, follow_up)
    assert set(results) == set(ids)
    assert "alpha contents" in results[ids[0]]
    assert "beta contents" in results[ids[1]]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_usage_is_reported(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    # A plausible count of the prompt (system prompt and tools: ~3,000 tokens); one far below
    # what was sent would be taken for a server that cut the prompt (the truncation guard).
    mock_llm.queue({"text": "Counted.", "usage": {"prompt_tokens": 4000, "completion_tokens": 34}})
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    (usage,) = [u for u in seen if u["sessionUpdate"] == "usage_update"]
    assert usage["used"] == 4034
    # Anthropic has no endpoint telling the window of an unknown model: the default applies.
    assert usage["size"] == (8192 if dialect == "anthropic" else WINDOW)


FINISHES = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_finish_reasons_map_to_stop_reasons(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    for finish, expected in FINISHES.items():
        if dialect == "ollama" and finish == "content_filter":
            continue  # Ollama has no refusal finish reason
        mock_llm.queue({"text": f"Answer ending with {finish}", "finish": finish})
        stop, seen = await agent.prompt()
        assert (finish, stop) == (finish, expected)
        shown = message_text(seen)
        assert shown.startswith(f"Answer ending with {finish}")
        # A reply cut off by the output limit is said to be cut; any other is shown as it came.
        assert ("The reply was cut off" in shown) == (finish == "length")
    await agent.still_works()


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_reasoning_cut_off_is_an_error_not_an_answer(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    thought = "Hmm, let me think about this at great length before"
    mock_llm.queue({"thought": thought, "finish": "length"})
    stop, seen = await agent.prompt()
    assert stop == "max_tokens"
    assert "".join(chunks(seen, "agent_thought_chunk")) == thought
    shown = message_text(seen)
    assert "ran out of output tokens" in shown
    assert "think about this" not in shown
    await agent.still_works()


# ----- faults -----------------------------------------------------------------------------------


def _429(dialect: str) -> list[dict[str, Any]]:
    return [{"fault": "status", "status": 429, "retry_after": 0.05}, {"text": ANSWER}]


def _500(dialect: str) -> list[dict[str, Any]]:
    return [{"fault": "status", "status": 500}, {"text": ANSWER}]


def _html_502(dialect: str) -> list[dict[str, Any]]:
    return [{"fault": "html", "status": 502}] * ATTEMPTS


def _envelope_400(dialect: str) -> list[dict[str, Any]]:
    return [{"fault": "status", "status": 400, "message": "mock: unknown field 'frobnicate'"}]


def _cut(dialect: str) -> list[dict[str, Any]]:
    return [{"text": ANSWER, "fault": "cut", "after": 6}]


def _error_frame(dialect: str) -> list[dict[str, Any]]:
    # After some text (so it cannot be retried), and not "overloaded" (so it is final).
    frame = {"text": ANSWER, "fault": "error_frame", "after": 6, "error_type": "api_error"}
    return [{**frame, "message": "mock: the upstream worker crashed"}]


def _slow_first_byte(dialect: str) -> list[dict[str, Any]]:
    return [{"text": ANSWER, "fault": "slow_first_byte", "seconds": 1.5}, {"text": ANSWER}]


def _stall(dialect: str) -> list[dict[str, Any]]:
    return [{"text": ANSWER, "fault": "stall", "after": 6, "seconds": 2.0}]


def _answered(seen: list[dict[str, Any]], notice: str) -> None:
    """A retry notice first (as an agent message), then the whole answer."""
    messages = list(replies(seen).items())
    assert len(messages) == 2, messages
    (notice_id, notice_text), (_, answer) = messages
    assert notice_id is None
    assert notice in notice_text and "retrying" in notice_text and "attempt 2 of 3" in notice_text
    assert answer == ANSWER


def check_429(seen: list[dict[str, Any]]) -> None:
    _answered(seen, "429")
    assert "0.05 s" in message_text(seen)  # the server's Retry-After was honored


def check_500(seen: list[dict[str, Any]]) -> None:
    _answered(seen, "500")


def check_html_502(seen: list[dict[str, Any]]) -> None:
    final = list(replies(seen).values())[-1]
    assert "502" in final and f"gave up after {ATTEMPTS} attempts" in final
    assert_no_markup(message_text(seen))
    assert "gateway trouble" not in message_text(seen)


def check_envelope_400(seen: list[dict[str, Any]]) -> None:
    (shown,) = replies(seen).values()  # not retried: no notice
    assert "400" in shown and "mock: unknown field 'frobnicate'" in shown


def _error_after_partial(seen: list[dict[str, Any]], *needles: str) -> None:
    """Part of the reply, then a separate message saying what went wrong."""
    (partial_id, partial), (error_id, error) = replies(seen).items()
    assert partial_id != error_id
    assert partial and ANSWER.startswith(partial) and partial != ANSWER
    assert any(n in error.lower() for n in needles), error


def check_cut(seen: list[dict[str, Any]]) -> None:
    _error_after_partial(seen, "closed", "connection")


def check_error_frame(seen: list[dict[str, Any]]) -> None:
    _error_after_partial(seen, "the upstream worker crashed")


def check_slow_first_byte(seen: list[dict[str, Any]]) -> None:
    _answered(seen, "did not start answering")


def check_stall(seen: list[dict[str, Any]]) -> None:
    _error_after_partial(seen, "timed out", "stopped answering")


FAULTS: dict[str, tuple[Callable[[str], list[dict[str, Any]]], Callable[..., None], bool]] = {
    # name: (script, check, needs the short read timeout)
    "429-then-success": (_429, check_429, False),
    "500-then-success": (_500, check_500, False),
    "html-502-persisting": (_html_502, check_html_502, False),
    "error-envelope-400": (_envelope_400, check_envelope_400, False),
    "cut-mid-stream": (_cut, check_cut, False),
    "error-frame-in-200": (_error_frame, check_error_frame, False),
    "slow-first-byte": (_slow_first_byte, check_slow_first_byte, True),
    "stall-mid-stream": (_stall, check_stall, True),
}
SPOT_CHECKED = ("429-then-success", "html-502-persisting", "error-frame-in-200", "cut-mid-stream")
FAULT_CASES = [("openai", name) for name in FAULTS] + [
    (dialect, name) for dialect in ("ollama", "anthropic") for name in SPOT_CHECKED
]


@pytest.mark.parametrize(
    ("dialect", "fault"), FAULT_CASES, ids=[f"{d}-{f}" for d, f in FAULT_CASES]
)
async def test_fault(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str, fault: str
) -> None:
    script, check, short_timeout = FAULTS[fault]
    env = {"ACP_SERVER_READ_TIMEOUT": "0.5"} if short_timeout else {}
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path, **env)
    mock_llm.queue(*script(dialect))
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    check(seen)
    assert mock_llm.pending == 0
    await agent.still_works()


# ----- llama.cpp quirks through the OpenAI backend ----------------------------------------------


async def test_empty_stream_is_asked_again_without_streaming(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    agent = await open_agent(server_factory, mock_llm, "openai", tmp_path)
    mock_llm.queue({"fault": "empty_stream"}, {"text": ANSWER})
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    assert message_text(seen) == ANSWER
    streamed, plain = mock_llm.chat_requests
    assert streamed.json["stream"] is True and streamed.json["tools"]
    assert plain.json["stream"] is False and plain.json["tools"]
    await agent.still_works()


async def test_assistant_content_is_never_null(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n", encoding="utf-8")
    agent = await open_agent(server_factory, mock_llm, "openai", tmp_path)
    mock_llm.queue(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "Read it.", "fault": "reject_null_content"},
    )
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    assert message_text(seen) == "Read it."
    follow_up = mock_llm.chat_requests[-1].json
    assistant = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    assert assistant and all(isinstance(m["content"], str) for m in assistant)
    assert assistant[0]["tool_calls"]


async def test_repeated_ids_assemble_one_call_per_index(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("beta\n", encoding="utf-8")
    agent = await open_agent(server_factory, mock_llm, "openai", tmp_path)
    mock_llm.queue(
        {
            "tool_calls": [
                {"id": "call_x", "name": "read_file", "arguments": {"path": "a.txt"}},
                {"id": "call_y", "name": "read_file", "arguments": {"path": "b.txt"}},
            ],
            "fault": "repeat_ids",
            "parallel": True,
        },
        {"text": "Done."},
    )
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    calls = [(u["toolCallId"], u["rawInput"]) for u in seen if u["sessionUpdate"] == "tool_call"]
    assert calls == [("call_x", {"path": "a.txt"}), ("call_y", {"path": "b.txt"})]
    results = tool_results("openai", mock_llm.chat_requests[-1])
    assert set(results) == {"call_x", "call_y"}
    assert "alpha" in results["call_x"] and "beta" in results["call_y"]


@pytest.mark.parametrize("dialect", ["openai", "ollama"])
async def test_inline_tool_call_is_recovered(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    (tmp_path / "a.txt").write_text("alpha from the file\n", encoding="utf-8")
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    mock_llm.queue(
        {
            "text": "Let me look at it.",
            "fault": "inline_tool_call",
            "name": "read_file",
            "arguments": {"path": "a.txt"},
            "piece_chars": 4,
        },
        {"text": "It says alpha."},
    )
    stop, seen = await agent.prompt()
    assert stop == "end_turn"
    for piece in chunks(seen):
        assert "tool_call" not in piece
        assert_no_markup(piece)
    assert message_text(seen) == "Let me look at it.It says alpha."
    (call,) = [u for u in seen if u["sessionUpdate"] == "tool_call"]
    assert call["toolCallId"].startswith("call_recovered_")
    assert call["rawInput"] == {"path": "a.txt"}
    results = tool_results(dialect, mock_llm.chat_requests[-1])
    assert "alpha from the file" in results[call["toolCallId"]]
    # The markup is not in history either: the assistant turn resent holds only the prose.
    assistant = [m for m in mock_llm.chat_requests[-1].json["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in assistant] == ["Let me look at it."]
    assert json.dumps(assistant).count("<tool_call>") == 0
