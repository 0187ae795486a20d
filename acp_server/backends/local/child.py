"""The embedded model's server process: `llama_cpp.server`, stopped when the agent is gone.

The agent starts `python -m acp_server.backends.local.child ARGS` with a pipe on its stdin and
never writes to it. When the agent process ends in any way (stdin closed by the editor, a
signal, a crash, even SIGKILL) the pipe's last writer is gone, this process reads end-of-file
and exits: a model server left running after its agent would hold a port and a few hundred MB
for nothing. Then it runs `llama_cpp.server` exactly as `python -m llama_cpp.server ARGS` would,
with llama.cpp's own log (load details, timings, prompt-cache hits) in the agent's
`local-model.log` when ACP_SERVER_LOCAL_VERBOSE=1.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading


def _exit_when_the_agent_is_gone() -> None:
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


VERBOSE_ENV = "ACP_SERVER_LOCAL_VERBOSE"  # 1: llama.cpp's own log (timings, prompt cache hits)


def main() -> None:
    threading.Thread(target=_exit_when_the_agent_is_gone, daemon=True).start()
    args = sys.argv[1:]
    if os.environ.get(VERBOSE_ENV, "").strip() == "1" and "--verbose" in args:
        args[args.index("--verbose") + 1] = "True"
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
