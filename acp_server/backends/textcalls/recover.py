"""Tool calls a model wrote as text, recovered as real calls — for any backend.

Some models (or servers without a tool-call parser for them) write calls into the reply text:

    Let me look.<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>

or in one of the other shapes `forms` lists (a fenced JSON block, a bare JSON reply,
Llama's and Mistral's markup). `scanner.InlineCallScanner` finds them while the reply streams;
recovered calls get ids `call_recovered_N`. `"parameters"` is accepted for `"arguments"`, and
arguments given as a JSON string are decoded.

`CallRecovery` wraps a backend's event stream with the scanner and the policy "a reply whose only
call could not be used gets one retry with an explanation": the request is sent once more with
the assistant's text and a short user message that shows the expected format. If that reply is
unusable too, the turn ends without the call (its text is shown) and a notice says so; a reply
that only looked like a call (a fenced call to a tool that was not offered) gets a notice too.
A reply that only echoed tool-result markup, or was empty right after tool results (small
models fall silent there), is asked again the same way, once.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from acp_server.backends.textcalls.scanner import InlineCallScanner
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ModelRequest,
    Notice,
    StreamError,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    text_message,
)

EXPLANATION = (
    "Your last message contained a tool call I could not use ({problem}), so it was not run. "
    "To call a tool, write one block per call, exactly like this, with the arguments as a JSON "
    'object:\n<tool_call>{{"name": "TOOL_NAME", "arguments": {{"ARGUMENT": "VALUE"}}}}</tool_call>'
)
EXAMPLE = (
    "\nFor {name}, the arguments hold the values themselves, not the tool's schema: "
    '<tool_call>{{"name": "{name}", "arguments": {{{arguments}}}}}</tool_call>'
)
RETRY_NOTICE = (
    "The model wrote a tool call that could not be used ({problem}); asking it to try again."
)
ECHO_NOTICE = "The model repeated the tool result instead of answering; asking it again."
ECHO_EXPLANATION = (
    "Your last message only repeated the tool result instead of answering. Answer my request "
    "now in plain words, using that result, or call another tool if you need more."
)
EMPTY_NOTICE = "The model sent an empty reply after the tool result; asking it to answer."
EMPTY_EXPLANATION = (
    "Your last message was empty. Answer my request now in plain words, using the tool results "
    "above, or call another tool if you need more."
)
LOST = "The model wrote a tool call that could not be used ({problem}); it was not run."
UNREAD = (
    "The model's reply looks like a tool call, but {problem}, so nothing was run. A model that "
    "keeps doing this may not be able to use this agent's tools: see docs/models.md."
)

# ----- the stream wrapper and the retry policy ---------------------------------------------------


@dataclass
class _Pass:
    """What one reply contained, as far as recovery cares."""

    raw_text: list[str] = field(default_factory=list)
    finish: FinishReason | None = None
    native_calls: bool = False
    recovered: int = 0
    problems: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    echoed: int = 0
    shown: bool = False

    def retry(self, request: ModelRequest) -> tuple[str, str] | None:
        """(the notice, the explanation for the model) when the reply is to be asked again:
        its only call could not be used, it only echoed a tool result, or it was empty right
        after tool results; else None."""
        valid = self.native_calls or self.recovered > 0
        if self.finish not in ("stop", "tool_calls") or valid or not request.tools:
            return None
        if self.problems:
            problem = self.problems[0]
            explanation = EXPLANATION.format(problem=problem) + example(problem, request.tools)
            return RETRY_NOTICE.format(problem=problem), explanation
        if self.echoed and not self.shown:
            return ECHO_NOTICE, ECHO_EXPLANATION
        after_results = bool(request.messages) and request.messages[-1].role == "tool"
        if after_results and not self.shown and not "".join(self.raw_text).strip():
            return EMPTY_NOTICE, EMPTY_EXPLANATION  # small models fall silent after a result
        return None


Send = Callable[[ModelRequest], AsyncIterator[Event]]


class CallRecovery:
    """Inline tool-call recovery for one backend instance (which numbers the recovered ids)."""

    def __init__(self) -> None:
        self._numbers = itertools.count()
        self.usable = 0  # replies that asked for a tool in a way that could be run
        self.lost = 0  # replies whose call-shaped text could not be used, even asked again

    def next_id(self) -> str:
        return f"call_recovered_{next(self._numbers)}"

    async def stream(self, send: Send, request: ModelRequest) -> AsyncIterator[Event]:
        """`send(request)`'s events with inline calls recovered; one retry for a bad call."""
        first = _Pass()
        async for event in self._filter(send(request), first, request):
            yield event
        if first.finish is None:
            return  # ended by a StreamError (or without a finish): nothing to decide
        retry = first.retry(request)
        if retry is None:
            self._count(first)
            for event in _closing(first):
                yield event
            return
        yield Notice(retry[0], "info")
        again = retry_request(request, "".join(first.raw_text), retry[1])
        second = _Pass()
        async for event in self._filter(send(again), second, request):
            yield event
        if second.finish is not None:
            self._count(second)
            second.shown = second.shown or first.shown  # the round's text so far
            for event in _closing(second):
                yield event

    def _count(self, done: _Pass) -> None:
        if done.native_calls or done.recovered:
            self.usable += 1
        elif done.problems or done.unread:
            self.lost += 1

    async def _filter(
        self, events: AsyncIterator[Event], out: _Pass, request: ModelRequest
    ) -> AsyncIterator[Event]:
        """Pass events through the scanner; hold back the Finish (recorded in `out`)."""
        offered = {tool.name: tool.parameters for tool in request.tools}
        scanner = InlineCallScanner(self.next_id, offered)
        last: Event | None = None
        try:
            async for last in events:
                if isinstance(last, TextDelta):
                    out.raw_text.append(last.text)
                    for item in scanner.feed(last.text):
                        yield item
                elif isinstance(last, Finish | StreamError):
                    break
                else:
                    out.native_calls = out.native_calls or isinstance(last, ToolCallDelta)
                    yield last
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()
        for item in scanner.end():
            yield item
        if isinstance(last, StreamError):
            yield last
        elif isinstance(last, Finish):
            out.finish = last.reason
        out.recovered = scanner.recovered
        out.problems = scanner.problems
        out.unread = scanner.unread
        out.echoed, out.shown = scanner.echoed, scanner.shown


def _closing(done: _Pass) -> list[Event]:
    """A notice for calls that were lost, then the reply's Finish. A reply that was nothing
    but a call that could not be used ends as a failure saying so (it is not an empty reply)."""
    out: list[Event] = []
    if done.problems:
        lost = LOST.format(problem=done.problems[0])
        if done.finish != "length" and not (done.shown or done.recovered or done.native_calls):
            return [StreamError(lost)]
        out.append(Notice(lost))
    elif done.unread and not (done.recovered or done.native_calls):
        out.append(Notice(UNREAD.format(problem=done.unread[0])))
    reason = done.finish or "stop"
    if done.recovered and reason == "stop":
        reason = "tool_calls"
    out.append(Finish(reason))
    return out


def example(problem: str, tools: Sequence[ToolSpec]) -> str:
    """For a call whose arguments did not fit, a call of that tool with its own argument names
    (small models send the tool's schema back as its arguments); "" otherwise."""
    for tool in tools:
        if problem.startswith(f"the arguments of {tool.name} do not fit"):
            properties = tool.parameters.get("properties")
            if not isinstance(properties, dict) or not properties:
                return ""
            required = [p for p in tool.parameters.get("required", ()) if p in properties]
            names = required or list(properties)[:1]
            arguments = ", ".join(f'"{name}": "..."' for name in names)
            return EXAMPLE.format(name=tool.name, arguments=arguments)
    return ""


def retry_request(request: ModelRequest, reply_text: str, explanation: str) -> ModelRequest:
    """The request again, plus the failed reply's text (unless it had none) and what was
    wrong with it."""
    said = [text_message("assistant", reply_text)] if reply_text.strip() else []
    extra = (*said, text_message("user", explanation))
    return dataclasses.replace(request, messages=request.messages + extra)
