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
"""

from __future__ import annotations

import dataclasses
import re

from acp_server.messages import ModelRequest

NO_TOOLS_NOTICE = (
    "The model {name} cannot call tools (its chat template has no place for them): it cannot "
    "read your files, search them or run commands, and it is not offered tools. For a local "
    "model that can, run `acp-server setup` or see docs/models.md."
)
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
