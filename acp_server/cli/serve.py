"""`acp-server` (or `acp-server serve`): serve ACP on stdin/stdout until stdin ends.

stdout is claimed for the wire first (`stdio`), then logging is set up (`logs`: a log file,
stderr only when asked, redacted), and one `AcpAgent` serves one `Connection`. The model
backend is chosen from the command line and the environment at the first session, not on the
way to `initialize`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server import __version__
from acp_server.cli.logs import LogSetupError, configure_logging, log_plan
from acp_server.protocol.handlers import AcpAgent
from acp_server.redaction import redact
from acp_server.settings import Settings, SettingsError
from acp_server.wire.jsonrpc import DEFAULT_MAX_LINE, Connection
from acp_server.wire.stdio import claim_stdout, open_sink, open_source

if TYPE_CHECKING:
    from acp_server.backends import Backend
    from acp_server.models.source import ModelSource

log = logging.getLogger("acp_server")

BACKGROUND_SECONDS = 1.0  # on a signal, for stopping background commands before the rest

# Shown when a person starts the server at a terminal, where it would otherwise sit silent.
TERMINAL_HINT = (
    "acp-server speaks ACP (the Agent Client Protocol, JSON-RPC) on stdin/stdout, for an "
    'editor to drive; see `acp-server --help`, or try `acp-server run "PROMPT"`. '
    "Ctrl-D or Ctrl-C stops it."
)


def _script(args: argparse.Namespace) -> str | None:
    return getattr(args, "script", None) or os.environ.get("ACP_SERVER_SCRIPT")


def choose_backend(args: argparse.Namespace) -> Backend:
    """The backend of sessions without a model choice (called at the first one): the script,
    else a probe of the local servers at the first prompt."""
    # The backends are imported here, and only the chosen one: none is needed for `initialize`.
    script = _script(args)
    if script:
        from acp_server.backends.scripted import ScriptedBackend

        return ScriptedBackend(Path(script).expanduser().resolve())
    from acp_server.backends.selection.select import AutoBackend
    from acp_server.config.file import ConfigError, config_path, load_config

    try:  # a key stored by `acp-server login` counts as set
        config = load_config(config_path(getattr(args, "config", None), os.environ)[0])
    except ConfigError:
        return AutoBackend(os.environ)  # the sessions say what is wrong with the file
    return AutoBackend(config.environ(os.environ))


def model_source(args: argparse.Namespace) -> ModelSource | None:
    """The models sessions choose from: `--model` (repeatable) or ACP_SERVER_MODEL, the
    configuration file, discovered local models. None with a script (it answers every prompt).
    Made at the first session: reading the file is not needed for `initialize`."""
    if _script(args):
        return None
    from acp_server.config.file import config_path
    from acp_server.models.catalogue import model_values
    from acp_server.models.source import ModelSource

    path, named = config_path(getattr(args, "config", None), os.environ)
    values = model_values(getattr(args, "model", None), os.environ)
    return ModelSource(values, os.environ, path, must_exist=named)


def header(arguments: list[str]) -> str:
    """The log's first line, written when the log file opens (`logs.LogFile`)."""
    python = sys.version.split()[0]
    started = f"acp-server {__version__} (Python {python}, pid {os.getpid()})"
    return f"{started} serving with arguments {arguments}"


def lean_http_imports() -> None:
    """Imports the HTTP stack makes that the server does without, kept out with a None in
    sys.modules (an import of that name then fails at once, and the library takes the
    fallback it has for the package being absent):

    - httpx's command-line client (click, pygments, rich: ~8 ms of the first prompt), which
      `import httpx` loads when it can and the server never runs;
    - `sniffio` and `trio` when they are not installed (0.07 ms to ask): httpcore tries to
      import them for every lock and event it makes, and each failed attempt searches the
      whole module path again (~45 times a prompt). They tell trio from asyncio, and this is
      asyncio.
    """
    blocked: dict[str, None] = {}
    if "httpx" not in sys.modules:
        blocked["httpx._main"] = None
    for name in ("sniffio", "trio"):
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            blocked[name] = None
    sys.modules.update(blocked)  # type: ignore[arg-type]


def serve(args: argparse.Namespace) -> int:
    """Serve ACP on stdin/stdout until stdin closes or a SIGTERM/SIGINT arrives; exit 0."""
    try:
        window = getattr(args, "context_window", None)
        settings = Settings.from_env(os.environ, context_window=window)
        settings.config_option = getattr(args, "config", None)
        plan = log_plan(args, os.environ)
    except (SettingsError, LogSetupError) as exc:
        print(f"acp-server: {exc}", file=sys.stderr)
        return 2
    wire_fd = claim_stdout()
    configure_logging(plan, header(sys.argv[1:]))
    lean_http_imports()
    if os.isatty(0):
        print(TERMINAL_HINT, file=sys.stderr, flush=True)
    try:
        asyncio.run(_serve(wire_fd, args, settings))
        # A connection attempt abandoned at teardown (a local server probed by discovery,
        # whose address lookup came back from its thread after the loop had stopped) leaves
        # an unstarted coroutine that Python reports on stderr at exit, which agent-shell
        # shows as an error. Seen on loaded machines only; nothing is lost by it.
        warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
    except Exception as exc:  # a fatal error: the one thing stderr always shows
        log.exception("the server stopped on an unexpected error")
        sys.stderr.write(
            f"acp-server stopped on an unexpected error: {redact(str(exc))}. "
            f"The details are in the log file {plan.file}.\n"
        )
        return 1
    return 0


def max_line(env: Mapping[str, str]) -> int:
    """The line limit: ACP_SERVER_MAX_LINE_BYTES (tests use a small one), else 64 MiB."""
    value = env.get("ACP_SERVER_MAX_LINE_BYTES", "").strip()
    if not value:
        return DEFAULT_MAX_LINE
    if value.isdigit() and int(value) > 0:
        return int(value)
    log.error(
        "ACP_SERVER_MAX_LINE_BYTES=%r is not a positive number of bytes; using the default",
        value,
    )
    return DEFAULT_MAX_LINE


async def _wind_down(timeout: float = 0.5) -> None:
    """Cancel what still runs (turns, work started after session/new such as a window lookup)
    and let it finish while the loop runs, before the store closes; again for what that work
    started meanwhile, within `timeout`. Left to `asyncio.run`, a connection attempt cut off
    at teardown leaves a "coroutine was never awaited" warning on stderr, which some editors
    show as an error."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await asyncio.sleep(0)  # callbacks already scheduled may start tasks of their own
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if not others:
            return
        for task in others:
            task.cancel()
        await asyncio.wait(others, timeout=max(deadline - loop.time(), 0))


_stopping: list[asyncio.Task[None]] = []


def _on_signal(serving: asyncio.Task[None]) -> None:
    """SIGTERM / SIGINT: stop the background commands first, while the editor still answers
    (an editor terminal is released with a request), then stop serving. A second signal stops
    at once."""
    if _stopping:
        serving.cancel()
        return

    async def stop() -> None:
        from acp_server.tools.commands.jobs import close_everywhere

        try:
            await close_everywhere(BACKGROUND_SECONDS)
        finally:
            serving.cancel()

    _stopping.append(asyncio.ensure_future(stop()))


async def _serve(wire_fd: int, args: argparse.Namespace, settings: Settings) -> None:
    if getattr(args, "max_turn_requests", None):
        settings.max_turn_requests = args.max_turn_requests
    if getattr(args, "sandbox", None):
        settings.sandbox = args.sandbox
    # One backend for every session of the process, made at the first one: a script's rounds
    # run on across sessions (as documented), and a probed local model is probed once.
    agent = AcpAgent(
        functools.cache(lambda: choose_backend(args)), settings, lambda: model_source(args)
    )
    conn = Connection(
        await open_source(0),
        await open_sink(wire_fd),
        requests=agent.request_handlers(),
        notifications=agent.notification_handlers(),
        max_line=max_line(os.environ),
    )
    agent.conn = conn
    task = asyncio.create_task(conn.serve())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, functools.partial(_on_signal, task))
    try:
        await task
        log.info("stopping: the editor closed stdin")
    except asyncio.CancelledError:
        log.info("stopping on a signal")
    finally:
        await _wind_down()
        agent.close()
    # Backstop: whatever a stuck task does, the process is gone within a second of the request.
    backstop = threading.Timer(0.8, os._exit, args=(0,))
    backstop.daemon = True
    backstop.start()
