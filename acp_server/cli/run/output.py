"""What a command printed, as `acp-server run` shows it on a terminal: the end of the output
(what the agent saw last matters most), dimmed, with how much was left out.

Only on a terminal: piped, stderr keeps its one line per tool call, which scripts read.
"""

from __future__ import annotations

from typing import Any

SHOWN_LINES = 20
SHOWN_CHARS = 2_000
FENCE = "```"


def command_output(content: Any) -> str | None:
    """The output in a finished command's tool-call content (its text after the status line,
    unfenced), or None when the content has none."""
    for item in content or []:
        block = item.get("content") if isinstance(item, dict) else None
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
            _status, _, rest = str(block["text"]).partition("\n")
            return _unfenced(rest)
    return None


def tail(output: str) -> tuple[list[str], int]:
    """The last lines of `output` to show (at most SHOWN_LINES, SHOWN_CHARS in all), and how
    many earlier lines are left out."""
    lines = output.rstrip("\n").split("\n")
    kept: list[str] = []
    size = 0
    for line in reversed(lines[-SHOWN_LINES:]):
        if size + len(line) > SHOWN_CHARS:
            line = "…" + line[-max(SHOWN_CHARS - size, 0) :] if not kept else ""
            if not line:
                break
        kept.append(line)
        size += len(line) + 1
    return kept[::-1], len(lines) - len(kept)


def _unfenced(text: str) -> str:
    stripped = text.strip("\n")
    first, _, body = stripped.partition("\n")
    if first.startswith(FENCE) and body.rstrip().endswith(FENCE):
        return body.rstrip()[: -len(FENCE)].rstrip("\n")
    return stripped
