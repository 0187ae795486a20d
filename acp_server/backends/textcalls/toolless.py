"""A local model that cannot call tools: told once, never offered them, never asked to pretend.

A model whose chat template has no place for tools (the embedded SmolLM2-135M) never sees the
tools it is offered, and asked about the user's files it makes some up. So for such a model
(`LocalBackend.calls_tools` is False) the backend, at the first request that offers tools:

- tells the user once (`NO_TOOLS_NOTICE`) what the model cannot do and where to find one that
  can;
- when that request's task is about the user's files or commands (`about_the_workspace`: a
  plain word test, such as "list the files here"), answers it itself, honestly
  (`NO_TOOLS_ANSWER`), instead of letting the model invent an answer; asked again, the model
  answers (the user now knows what that answer is worth);
- every request is sent without tools, its system prompt ending with `NO_TOOLS_NOTE`.

A model whose template takes tools but which, offered them, only writes calls the agent cannot
read (`never_calls`: `LOST_LIMIT` such replies and not one readable call) is treated the same
from then on, and the user is told why (`NEVER_CALLED_NOTICE`).
"""

from __future__ import annotations

import dataclasses
import re

from acp_server.backends.textcalls.recover import CallRecovery
from acp_server.messages import ModelRequest

NO_TOOLS_NOTICE = (
    "The model {name} cannot call tools (its chat template has no place for them): it cannot "
    "read your files, search them or run commands, and it is not offered tools. For a local "
    "model that can, run `acp-server setup` or see docs/models.md."
)
NEVER_CALLED_NOTICE = (
    "The model {name} has written {lost} tool calls the agent could not read, and none it "
    "could: from now on it is not offered tools, so it cannot read your files or run commands. "
    "For a local model that calls tools reliably, run `acp-server setup` or see "
    "docs/models.md. It is offered tools again when the agent restarts."
)
LOST_LIMIT = 2  # replies with an unreadable call, and no readable one, before tools go


def never_calls(recovery: CallRecovery) -> bool:
    """Whether a model offered tools has shown it cannot call them: `LOST_LIMIT` replies held a
    call it wrote that could not be read (even when asked again), and not one could."""
    return recovery.lost >= LOST_LIMIT and recovery.usable == 0


NO_TOOLS_ANSWER = (
    "I can't do that here: this model ({name}) cannot use tools, so it cannot see your files or "
    "folders, or run commands, and anything it said about them would be made up. Use a model "
    "that can call tools: `acp-server setup` offers one that runs on this machine "
    "(docs/models.md). Ask again to get this model's own answer anyway, from what it knows."
)
NO_TOOLS_NOTE = (
    "\n\nIn this conversation you have no tools: you cannot see the user's files or folders and "
    "cannot run commands. If a request needs them, say so; never make up file names or contents."
)
# Words of a request about the user's files, folders or commands (nouns and commands, not
# verbs such as "write" or "list", which ask for a poem or a list of ideas as often).
_WORKSPACE = re.compile(
    r"\b(files?|folders?|director(y|ies)|repo(sitory)?|project|codebase|path|ls|cat|grep|"
    r"run|execute|tests?|fix)\b"
    r"|\w\.(py|js|ts|md|txt|json|toml|ya?ml|rs|go|c|h|java|sh)\b",
    re.IGNORECASE,
)


def about_the_workspace(request: ModelRequest) -> bool:
    """Whether the request's last user message asks about files, folders or commands."""
    users = [m for m in request.messages if m.role == "user"]
    return bool(users) and _WORKSPACE.search(users[-1].text) is not None


def without_tools(request: ModelRequest) -> ModelRequest:
    """The request with no tools, its system prompt saying so."""
    return dataclasses.replace(request, tools=(), system=request.system + NO_TOOLS_NOTE)
