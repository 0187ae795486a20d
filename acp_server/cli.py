"""Command line: `acp-server` (serve ACP on stdio, the default) and `acp-server run "prompt"`.

Serving must reach the `initialize` answer fast, so this module imports only what serving needs;
the headless client is imported only for `run`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server import __version__

if TYPE_CHECKING:
    from acp_server.backends import Backend

log = logging.getLogger("acp_server")

DESCRIPTION = """\
A coding agent that editors launch as a subprocess and talk to over the Agent Client Protocol
(ACP v1, newline-delimited JSON-RPC on stdin/stdout).

  acp-server                      serve ACP on stdin/stdout (what an editor runs)
  acp-server run "PROMPT"         start a server, send one prompt, print the streamed reply
  acp-server sessions [export ID] list the stored sessions; export one as Markdown or JSON
"""

EPILOG = """\
environment:
  ACP_SERVER_MODEL=D:MODEL   same as --model D:MODEL
  OPENAI_BASE_URL, OPENAI_API_KEY        any OpenAI-compatible server (vLLM, LM Studio, ...)
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL  Anthropic
  OLLAMA_HOST                            Ollama (default 127.0.0.1:11434)
  ACP_SERVER_SCRIPT=FILE     same as --script FILE
  ACP_SERVER_LOG_LEVEL=LEVEL same as --log-level LEVEL
  ACP_SERVER_LOG_THIRD_PARTY=1  also log what httpx and other libraries log below warning
  ACP_SERVER_MAX_LINE_BYTES=N  the longest message line accepted (default 64 MiB)

Logs never go to stdout (stdout carries the protocol); they go to stderr, errors only by default.
"""

RUN_EPILOG = """\
The reply goes to stdout; thoughts, tool activity, notices and every failure go to stderr.

exit status:
  0    the agent answered (stop reason end_turn)
  1    the turn failed: no usable model (none configured, a missing API key), the model
       server could not be reached or kept failing, or the agent or its server failed;
       stderr says what happened
  2    the command line cannot work: an unknown option, a malformed --model or
       ACP_SERVER_MODEL, a --script that is missing or invalid, a --cwd that is not a
       directory (nothing was started)
  3    the agent stopped before it finished: the model's output limit (max_tokens), the
       --max-turn-requests limit, or the model refused
  130  interrupted: Ctrl-C cancelled the turn
"""


# Shown when a person starts the server at a terminal, where it would otherwise sit silent.
TERMINAL_HINT = (
    "acp-server speaks ACP (the Agent Client Protocol, JSON-RPC) on stdin/stdout, for an "
    'editor to drive; see `acp-server --help`, or try `acp-server run "PROMPT"`. '
    "Ctrl-D or Ctrl-C stops it."
)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--script",
        metavar="FILE",
        type=Path,
        default=argparse.SUPPRESS,
        help="answer with the scripted backend, playing FILE (JSON array or JSONL of rounds)",
    )
    parser.add_argument(
        "--model",
        metavar="DIALECT:MODEL",
        default=argparse.SUPPRESS,
        help="the model, e.g. ollama:qwen3:8b, openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5",
    )
    parser.add_argument(
        "--max-turn-requests",
        metavar="N",
        type=int,
        default=argparse.SUPPRESS,
        help="stop a turn after N model requests (default 50)",
    )
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default=argparse.SUPPRESS,
        help="what to log to stderr (default: error)",
    )
    parser.add_argument(
        "--log-file",
        metavar="FILE",
        type=Path,
        default=argparse.SUPPRESS,
        help="also write a detailed log (debug level) to FILE",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-server",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Some editor configurations launch agents as `agent acp`: accept that spelling too.
    serve = sub.add_parser("serve", aliases=["acp"], help="serve ACP on stdin/stdout (the default)")
    _common(serve)
    run = sub.add_parser(
        "run",
        help="send one prompt through a real server and print the reply",
        description="Start a server over pipes, send one prompt, print the streamed reply.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(run)
    run.add_argument("prompt", help="the prompt text")
    run.add_argument(
        "--cwd",
        metavar="DIR",
        type=Path,
        default=None,
        help="the session's working directory (default: the current directory)",
    )
    run.add_argument(
        "--mode",
        choices=["ask", "accept_edits", "plan", "bypass"],
        default=None,
        help="permission mode for the session (default: ask; `run` cannot ask you, so calls "
        "that need permission are refused unless the mode allows them)",
    )
    # Everything after `sessions` goes, as is, to sessions_cli (imported only then): no option
    # can start with the prefix "\0", so this parser takes none of them for itself.
    sessions = sub.add_parser(
        "sessions",
        help="list the stored sessions; export one as Markdown or JSON (see sessions -h)",
        add_help=False,
        prefix_chars="\0",
    )
    sessions.add_argument("arguments", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "sessions":
        from acp_server.sessions_cli import main as sessions_main

        return sessions_main(args.arguments)
    if args.command == "run":
        from acp_server.client import run_headless

        return run_headless(args)
    return serve(args)


def configure_logging(args: argparse.Namespace) -> None:
    """stderr gets --log-level (default error); --log-file gets everything of ours (debug).
    Other libraries' loggers stay at warning: at debug, httpx and httpcore print request and
    response headers. ACP_SERVER_LOG_THIRD_PARTY=1 lets them log at our level. Every line is
    redacted, so no API key reaches a log either way."""
    from acp_server.redaction import RedactingFormatter

    level_name = getattr(args, "log_level", None) or os.environ.get("ACP_SERVER_LOG_LEVEL", "error")
    level = getattr(logging, level_name.upper(), logging.ERROR)
    log_file = getattr(args, "log_file", None)
    ours = logging.DEBUG if log_file is not None else level
    logging.getLogger("acp_server").setLevel(ours)
    third_party = os.environ.get("ACP_SERVER_LOG_THIRD_PARTY", "") not in ("", "0")
    root = logging.getLogger()
    root.setLevel(ours if third_party else max(ours, logging.WARNING))
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(level)
    stderr.setFormatter(RedactingFormatter("acp-server %(levelname)s %(name)s: %(message)s"))
    root.addHandler(stderr)
    if log_file is not None:
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)


def choose_backend(args: argparse.Namespace) -> Backend:
    script = getattr(args, "script", None) or os.environ.get("ACP_SERVER_SCRIPT")
    if script:
        from acp_server.backends.scripted import ScriptedBackend

        return ScriptedBackend(Path(script).expanduser().resolve())
    from acp_server.backends import select

    try:
        return select.choose(getattr(args, "model", None), os.environ)
    except select.ModelSpecError as exc:
        from acp_server.backends.unconfigured import UnconfiguredBackend

        return UnconfiguredBackend(str(exc))


def serve(args: argparse.Namespace) -> int:
    """Serve ACP on stdin/stdout until stdin closes or a SIGTERM/SIGINT arrives; exit 0."""
    from acp_server.stdio import claim_stdout

    wire_fd = claim_stdout()
    configure_logging(args)
    if os.isatty(0):
        print(TERMINAL_HINT, file=sys.stderr, flush=True)
    asyncio.run(_serve(wire_fd, args))
    return 0


def max_line(env: Mapping[str, str]) -> int:
    """The line limit: ACP_SERVER_MAX_LINE_BYTES (tests use a small one), else 64 MiB."""
    from acp_server.jsonrpc import DEFAULT_MAX_LINE

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


async def _serve(wire_fd: int, args: argparse.Namespace) -> None:
    from acp_server.config import Settings
    from acp_server.jsonrpc import Connection
    from acp_server.protocol import AcpAgent
    from acp_server.stdio import open_sink, open_source

    settings = Settings()
    if getattr(args, "max_turn_requests", None):
        settings.max_turn_requests = args.max_turn_requests
    agent = AcpAgent(lambda: choose_backend(args), settings)
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
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("stopping on a signal")
    finally:
        agent.close()
    # Backstop: whatever a stuck task does, the process is gone within a second of the request.
    backstop = threading.Timer(0.8, os._exit, args=(0,))
    backstop.daemon = True
    backstop.start()
