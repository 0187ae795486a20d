"""Guards for small models, where a round's tool calls are judged before they run.

Small local models, after a tool result, often ask for the very same call again (the same
name and arguments, as if the result had not come). `repeated` finds that: the call is one of
the previous round's, whose results are the only messages since. It is not run again; its result
(`REPEATED_RESULT`) tells the model it already has what it asked for and to answer with it.
Only calls that could not do anything new are held back: reading and searching the project
(`STABLE`: the answer cannot have changed meanwhile), and writing or editing a file (`MADE`: the
change is already made, and an edit whose new text holds its old text would be made twice —
the 1.5B sent its `true` → `false` edit of config.json seven more times after it succeeded).
Reading a background command's output again, or running a command again, is how a model waits
for something: never held back.
Two other guards live with the calls a model writes as text (`backends.textcalls`): a reply that
only echoes tool-result markup is asked again and never shown, and a reply that looks like a
call but is not one ends with a notice saying nothing was run.
"""

from __future__ import annotations

from collections.abc import Sequence

from acp_server.messages import Message, ToolCall

REPEATED_RESULT = (
    "Not run again: you just called {name} with these same arguments, and its result is the "
    "tool result right before your last message. Answer the user now using that result; call "
    "a tool again only with different arguments."
)


STABLE = frozenset({"read_file", "list_directory", "grep", "glob", "search_tools"})
MADE = frozenset({"edit_file", "write_file"})


def repeated(call: ToolCall, history: Sequence[Message]) -> bool:
    """Whether `call`, in the last assistant message of `history`, repeats a call of a `STABLE`
    or `MADE` tool in the round just before it, whose results are all that came between."""
    last = _last_assistant(history)
    if last is None or call.name not in STABLE | MADE:
        return False
    before = last - 1
    while before >= 0 and history[before].role == "tool":
        before -= 1
    if before < 0 or before == last - 1 or history[before].role != "assistant":
        return False
    return any(
        (earlier.name, earlier.arguments) == (call.name, call.arguments)
        for earlier in history[before].tool_calls
    )


def _last_assistant(history: Sequence[Message]) -> int | None:
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "assistant":
            return index
    return None
