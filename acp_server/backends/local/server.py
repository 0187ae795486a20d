"""One `llama_cpp.server` child process per model file, shared by every session of the agent.

`LocalServer.url()` starts it at the first call (later calls wait for the same start): on a
free 127.0.0.1 port, in a process group of its own, its output appended to a log file (never
our stdout, which is the wire), and waits until `GET /v1/models` answers. A server that exits
while starting, or does not answer in time, is a `LocalServerError` whose message names the log
and ends with its last lines. `stop()` ends it (SIGTERM to its group, SIGKILL if it lingers);
`stop_all()` runs at exit, and the child also exits by itself when the agent is gone (see
`child`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

START_TIMEOUT = 120.0  # a cold start on a busy machine; SmolLM2-135M usually takes 2-5 s
STOP_GRACE = 3.0
PORT_ATTEMPTS = 3  # another process may take the free port before the server binds it
_servers: dict[tuple[Path, int, str | None], LocalServer] = {}


class LocalServerError(Exception):
    """The embedded model's server could not be started; the message says why and what to do."""


class LocalServer:
    """`llama_cpp.server` serving `gguf` with a window of `n_ctx` tokens."""

    def __init__(
        self,
        gguf: Path,
        n_ctx: int,
        log_path: Path,
        *,
        chat_format: str | None = "chatml",
        threads: int | None = None,
    ) -> None:
        self.gguf = gguf
        self.n_ctx = n_ctx
        self.log_path = log_path
        self.chat_format = chat_format  # None: the chat template in the model file
        self.threads = threads  # None: llama.cpp's choice (every core)
        self.alias = gguf.stem
        self.start_timeout = START_TIMEOUT
        self._proc: subprocess.Popen[bytes] | None = None
        self._url: str | None = None
        self._lock = asyncio.Lock()

    def argv(self, port: int) -> list[str]:
        # Without --chat_format, llama-cpp-python renders the model file's own template.
        chat = [] if self.chat_format is None else ["--chat_format", self.chat_format]
        chat += [] if self.threads is None else ["--n_threads", str(self.threads)]
        return [
            sys.executable, "-m", "acp_server.backends.local.child",
            "--model", str(self.gguf),
            "--model_alias", self.alias,
            *chat,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--verbose", "False",
        ]  # fmt: skip

    @property
    def running(self) -> bool:
        """Started and answering (as far as we know: it has not exited)."""
        return self._url is not None and self._proc is not None and self._proc.poll() is None

    async def url(self) -> str:
        """The OpenAI-compatible base URL (…/v1) of the running server, started if need be."""
        async with self._lock:
            if self.running:
                assert self._url is not None
                return self._url
            self._url = None
            deadline = time.monotonic() + self.start_timeout
            for _attempt in range(PORT_ATTEMPTS):
                url = await self._start_once(deadline)
                if url is not None:
                    self._url = url
                    return url
            raise self._failure("another program kept taking the port it was given")

    async def _start_once(self, deadline: float) -> str | None:
        """Start on a free port and wait; None when the port was taken meanwhile."""
        port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as sink:
            self._proc = subprocess.Popen(
                self.argv(port),
                stdin=subprocess.PIPE,  # never written: its end tells the child we are gone
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        log.info("starting the embedded model %s on port %d (log: %s)", self.gguf, port, sink.name)
        url = f"http://127.0.0.1:{port}/v1"
        await self._wait_ready(url, deadline)
        if self._proc is not None:
            return url
        if "address already in use" in _tail(self.log_path).lower():
            return None
        raise self._failure("it stopped while starting")

    async def _wait_ready(self, url: str, deadline: float) -> None:
        """Until /models answers (the process is left running), it exits, or time runs out."""
        import httpx

        async with httpx.AsyncClient(timeout=2.0) as client:
            while self._proc is not None and self._proc.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{url}/models")).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    self.stop()
                    raise self._failure(f"it did not answer within {self.start_timeout:.0f} s")
                await asyncio.sleep(0.1)
        self.stop()

    def _failure(self, what: str) -> LocalServerError:
        from acp_server.backends.local.install import install_command

        return LocalServerError(
            f"The embedded model could not be started ({what}). Its server's log is "
            f"{self.log_path}; it ends with:\n{_tail(self.log_path)}\n"
            "Check that llama-cpp-python is installed with its server extra "
            f"({install_command()}), or choose another model with --model."
        )

    def stop(self) -> None:
        """End the server and whatever it started; nothing happens when it is not running."""
        proc, self._proc, self._url = self._proc, None, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def shared(
    gguf: Path, n_ctx: int, log_path: Path, chat_format: str | None, threads: int | None = None
) -> LocalServer:
    """The one server of this process for `gguf` at `n_ctx` with `chat_format` (made, not
    started, at first ask)."""
    key = (gguf, n_ctx, chat_format)
    if not _servers:
        atexit.register(stop_all)
    if key not in _servers:
        _servers[key] = LocalServer(gguf, n_ctx, log_path, chat_format=chat_format, threads=threads)
    return _servers[key]


def stop_all() -> None:
    for server in list(_servers.values()):
        server.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        return path.read_text("utf-8", errors="replace")[-limit:].strip() or "(nothing)"
    except OSError:
        return "(no log was written)"
