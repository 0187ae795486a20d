"""Wire tap: run a command and relay its stdio, recording every line in both directions.

    python tap.py CAPTURE.jsonl -- COMMAND [ARG...]

Each line of CAPTURE is {"from": "client" | "agent", "line": "<the raw line>"}. The tests'
`conformance` fixture puts this between an SDK client and the real server, then validates every
agent line against the official ACP schema. The child's stderr passes straight through.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
from typing import IO


def main() -> int:
    capture_path, sep, *command = sys.argv[1:]
    assert sep == "--", "usage: tap.py CAPTURE -- COMMAND [ARG...]"
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    capture = open(capture_path, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit

    def record(side: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\n")
        with lock:
            capture.write(json.dumps({"from": side, "line": text}) + "\n")
            capture.flush()

    def pump(src: IO[bytes], dst: IO[bytes], side: str) -> None:
        try:
            for raw in iter(src.readline, b""):
                record(side, raw)
                dst.write(raw)
                dst.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.close()

    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    threads = [
        threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin, "client"), daemon=True),
        threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, "agent")),
    ]
    for t in threads:
        t.start()
    code = child.wait()
    threads[1].join(timeout=5)
    capture.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
