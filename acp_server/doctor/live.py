"""`doctor --live`: one tiny request to the model new sessions start with, offering one tool,
to see that it answers and calls tools (a model that cannot only talks, the agent then cannot
read, edit or run anything)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from acp_server.backends.selection.select import from_provider
from acp_server.doctor import Check, fail, ok, warn
from acp_server.messages import (
    ModelRequest,
    StreamError,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    text_message,
)
from acp_server.models.catalogue import ModelEntry

LIVE_TIMEOUT = 60.0  # a small local model may load first
WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
REQUEST = ModelRequest(
    messages=(text_message("user", "What is the weather in Paris right now?"),),
    tools=(WEATHER,),
    system="Answer questions about the weather by calling get_weather.",
    max_tokens=512,
)


async def live_check(
    entry: ModelEntry, env: Mapping[str, str], timeout: float = LIVE_TIMEOUT
) -> Check:
    """Ask `entry` once, with one tool offered; say whether it called it."""
    backend = from_provider(
        entry.provider,
        entry.model,
        {"ACP_SERVER_RETRY_ATTEMPTS": "1", **env},
        window=entry.window,
        adaptive_thinking=entry.adaptive_thinking,
    )
    called, said, failure = None, "", None
    try:
        async with asyncio.timeout(timeout):
            async for event in backend.stream(REQUEST):
                if isinstance(event, ToolCallDelta) and event.name:
                    called = event.name
                elif isinstance(event, TextDelta):
                    said += event.text
                elif isinstance(event, StreamError):
                    failure = event.message
    except TimeoutError:
        failure = f"no complete answer within {timeout:g} s"
    finally:
        closing = getattr(backend, "aclose", None)
        if closing is not None:
            await closing()
    return _verdict(entry, called, said, failure)


def _verdict(entry: ModelEntry, called: str | None, said: str, failure: str | None) -> Check:
    name = f"Live test of {entry.value}"
    if failure is not None:
        return fail(f"{name}: the request failed", failure)
    if called == WEATHER.name:
        return ok(f"{name}: it answered and called the tool it was offered")
    if called is not None:
        return warn(f"{name}: it called a tool that does not exist ({called})", _CHOOSE)
    quoted = " ".join(said.split())[:80]
    if entry.dialect == "local":  # the embedded model answers; it is not meant to do more
        return warn(
            f"{name}: it answered, in words ({quoted!r}): a model this small does not call "
            "tools, so the agent can talk but not read, edit or run anything",
            "It is for trying the agent offline. For real work name a model that calls tools "
            "(`acp-server setup` helps choose one).",
        )
    return fail(f"{name}: it answered in words instead of calling the tool: {quoted!r}", _CHOOSE)


_CHOOSE = (
    "The agent needs a model that calls tools to read, edit and run anything. Choose one that "
    "does (for example qwen3 or llama3.1 on Ollama, or a hosted model)."
)
