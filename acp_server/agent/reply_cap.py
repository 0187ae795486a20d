"""The cap on a reply's length (`max_tokens`), from the window and the model's output limit.

Below `CAPPED_WINDOW` a reply is capped: a small local model otherwise rambles until its window
is full (minutes on a CPU), and then the next request no longer fits. The cap is the room the
request leaves in the window (kept a little short of it: the prompt's size is an estimate, and a
server such as vLLM refuses a request whose prompt and cap together exceed the window), never
less than the reply reserve the budget keeps free, and never more than the model's own output
limit (the catalogue's). Capping at the reserve alone cut thinking models and long file writes
short: 1,024 tokens on a 4K window, 2,048 on 8K. Larger windows are hosted or big local
models: they keep their server's default. Only a window that is known: the conservative
default for an unknown one says nothing about the model.
"""

from __future__ import annotations

from acp_server.context import Window

CAPPED_WINDOW = 32_768
ESTIMATE_MARGIN = 0.1  # of the prompt's estimated size, kept free besides it


def reply_cap(window: Window, used: int | None, output_limit: int | None) -> int | None:
    """The `max_tokens` of a request whose prompt is about `used` tokens (None: not known)."""
    if not window.known or window.size >= CAPPED_WINDOW:
        return None
    cap = window.reply_reserve
    if used is not None:
        cap = max(cap, window.size - int(used * (1 + ESTIMATE_MARGIN)))
    return min(cap, output_limit) if output_limit else cap
