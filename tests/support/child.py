"""Child processes a test can signal and read without waiting for ever.

A test run started in the background (`nohup pytest … &`) has SIGINT ignored, and every process
it starts inherits that: Python leaves an inherited SIG_IGN in place (no KeyboardInterrupt), and
`subprocess` does not reset it (`restore_signals` covers SIGPIPE, SIGXFZ and SIGXFSZ only). A
test that sends SIGINT to a child therefore starts it with `preexec_fn=default_sigint`, and reads
its output with `read_until`, which gives up at a deadline instead of blocking.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable

import pytest


def default_sigint() -> None:
    """In the child, before it runs its program: SIGINT interrupts, as at a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_until(fd: int, done: Callable[[bytes], bool] | None = None, timeout: float = 60) -> bytes:
    """What `fd` gives until `done(what was read)` is true, or until its end when `done` is
    None; the test fails, with what was read, when that takes more than `timeout` seconds."""
    got = b""
    deadline = time.monotonic() + timeout
    while done is None or not done(got):
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"nothing more within {timeout:.0f} s; read so far: {got[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # a terminal whose last user is gone
            chunk = b""
        if not chunk:
            if done is None:
                return got
            pytest.fail(f"the output ended before what was awaited; it was: {got[-2000:]!r}")
        got += chunk
    return got
