"""Ready-made responders: a model that behaves plausibly for as many turns as a test runs.

`file_reader()` plays a tool-heavy coding session, the way the context tests need it:

- a request offering no tools is a summary request: it answers a short summary;
- the newest message is the user's and names a file (a word with a dot and an extension): it
  calls `read_file` on that file;
- the newest message is a tool result: it answers with a word taken from it (the first word
  of the result), so a test can tell the answer came from what was read;
- anything else: a short "Done.".

The agent's own notes (what changed: git's status, an instruction file found) are context, not
a request: it answers as if they were not there.
"""

from __future__ import annotations

import re
from typing import Any

from tests.support.mock_llm.script import Response
from tests.support.mock_llm.server import Responder
from tests.support.mock_llm.view import conversation, is_summary

SUMMARY_TEXT = "Summary: the user asks about files one at a time; each was read and answered."
_FILE = re.compile(r"[\w./-]+\.\w+")
_WORD = re.compile(r"\w+")
NOTE = "<agent-note>"


def file_reader(tool: str = "read_file", summary: str = SUMMARY_TEXT) -> Responder:
    """A responder for a long session that reads a file each turn and answers from it."""

    def respond(body: dict[str, Any]) -> Response:
        if is_summary(body):
            return {"text": summary}
        turns = [t for t in conversation(body) if not t.text.startswith(NOTE)]
        last = turns[-1] if turns else None
        if last is not None and last.role == "tool":
            return {"text": f"The file begins with {answer_word(last.text)}."}
        named = _FILE.findall(last.text) if last is not None and last.role == "user" else []
        if named:
            return {"tool_calls": [{"name": tool, "arguments": {"path": named[-1]}}]}
        return {"text": "Done."}

    return respond


def answer_word(result: str) -> str:
    """The word `file_reader` answers with after reading `result`."""
    match = _WORD.search(result)
    return match.group(0) if match else "nothing"
