"""Where the server's log lines go, and how many of them.

Editors run the server as a subprocess and show its stderr: Zed in its log, agent-shell as an
error in the chat for *every* line. So stderr stays silent unless asked (`--log-stderr` or
ACP_SERVER_LOG_STDERR=1); the only thing printed there by default is a fatal start-up error.
Log lines go to a rotating file instead: `config.log_path()` (the user state directory,
`~/.local/state/acp-server/log/acp-server.log` on Linux), or `--log-file FILE`; at most
MAX_BYTES per file and BACKUPS older files, so it never grows without bound.

The level (default info; debug when `--log-file` is given without one) comes from
`--log-level`, else ACP_SERVER_LOG, else ACP_SERVER_LOG_LEVEL (the older name). Other
libraries' loggers stay at warning, since at debug httpx and httpcore print request and
response headers; ACP_SERVER_LOG_THIRD_PARTY=1 lets them log at our level. Every line, whatever
the handler, goes through `redaction`, so no API key and no Authorization header reaches a log.

Start-up cost matters (`initialize` must answer fast): the file is opened, and
`logging.handlers` (~2 ms of imports) loaded, only when the first line is written; the
server's header line (version, pid, arguments) is logged then, before that line, rather than
at start (~5 ms that neither `initialize` nor `session/new` needs).
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from acp_server.redaction import RedactingFormatter
from acp_server.settings import log_path

if TYPE_CHECKING:
    from logging.handlers import RotatingFileHandler

LEVELS = ("debug", "info", "warning", "error")
DEFAULT_LEVEL = "info"
LEVEL_VARIABLES = ("ACP_SERVER_LOG", "ACP_SERVER_LOG_LEVEL")
MAX_BYTES = 1 << 20
BACKUPS = 3
FILE_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
STDERR_FORMAT = "acp-server %(levelname)s %(name)s: %(message)s"


class LogSetupError(ValueError):
    """The log settings cannot be used; the message is for a person."""


class LogPlan(NamedTuple):
    """What is logged, and where (a NamedTuple: a dataclass costs ~0.6 ms at start-up)."""

    level: int
    file: Path
    stderr: bool = False
    third_party: bool = False


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip() not in ("", "0")


def log_plan(args: argparse.Namespace, env: Mapping[str, str]) -> LogPlan:
    """The plan from the command line and the environment; raises LogSetupError for a level
    that does not exist (a misspelt level silently ignored would hide the lines asked for)."""
    log_file = getattr(args, "log_file", None)
    name, source = getattr(args, "log_level", None), "--log-level"
    for variable in LEVEL_VARIABLES:
        if not name and env.get(variable, "").strip():
            name, source = env[variable].strip(), variable
    name = (name or ("debug" if log_file is not None else DEFAULT_LEVEL)).lower()
    if name not in LEVELS:
        raise LogSetupError(
            f"{source} is {name!r}, which is not a log level; use one of {', '.join(LEVELS)}."
        )
    return LogPlan(
        level=getattr(logging, name.upper()),
        file=Path(log_file).expanduser() if log_file is not None else log_path(),
        stderr=bool(getattr(args, "log_stderr", False)) or _flag(env, "ACP_SERVER_LOG_STDERR"),
        third_party=_flag(env, "ACP_SERVER_LOG_THIRD_PARTY"),
    )


def configure_logging(plan: LogPlan, header: str | None = None) -> list[logging.Handler]:
    """Install the plan's handlers on the root logger; returns them (tests remove them).
    `header` is logged (at info, to every handler) when the log file opens."""
    logging.getLogger("acp_server").setLevel(plan.level)
    root = logging.getLogger()
    root.setLevel(plan.level if plan.third_party else max(plan.level, logging.WARNING))
    handlers: list[logging.Handler] = [LogFile(plan.file, header=header)]
    if plan.stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
        handlers[-1].setFormatter(RedactingFormatter(STDERR_FORMAT))
    for handler in handlers:
        handler.setLevel(plan.level)
        root.addHandler(handler)
    return handlers


class LogFile(logging.Handler):
    """A rotating log file, opened (its directory made) at the first line written. If it cannot
    be written, stderr gets one line saying so, and the log is off for this process."""

    def __init__(
        self,
        path: Path,
        max_bytes: int = MAX_BYTES,
        backups: int = BACKUPS,
        header: str | None = None,
    ) -> None:
        super().__init__()
        self.path = path
        self.header = header
        self.max_bytes, self.backups = max_bytes, backups
        self.setFormatter(RedactingFormatter(FILE_FORMAT))
        self._file: RotatingFileHandler | None = None
        self._broken = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._broken:
            return
        try:
            if self._file is None:
                self._file = self._open()
                if self.header is not None:  # through the logger: --log-stderr shows it too
                    logging.getLogger("acp_server").info("%s", self.header)
            self._file.emit(record)
        except OSError as exc:
            self._broken = True
            sys.stderr.write(
                f"acp-server: cannot write the log file {self.path} ({exc.strerror or exc}); "
                "logging is off. Choose another file with --log-file FILE.\n"
            )
            sys.stderr.flush()

    def _open(self) -> RotatingFileHandler:
        from logging.handlers import RotatingFileHandler

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(
            self.path, maxBytes=self.max_bytes, backupCount=self.backups, encoding="utf-8"
        )
        handler.setFormatter(self.formatter)
        # Errors while writing reach us (to report once), not logging's traceback on stderr.
        handler.handleError = functools.partial(_raise_os_error, handler)  # type: ignore[method-assign]
        return handler

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        super().close()


def _raise_os_error(handler: logging.Handler, record: logging.LogRecord) -> None:
    error = sys.exc_info()[1]
    if isinstance(error, OSError):
        raise error
    logging.Handler.handleError(handler, record)
