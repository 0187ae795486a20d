"""The log settings (`cli.logs`): the level and where lines go, rotation, a file that cannot be
written, and redaction on the way to the file."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server import redaction
from acp_server.cli.logs import LogFile, LogPlan, LogSetupError, configure_logging, log_plan


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, its handlers and levels put back after the test."""
    root, ours = logging.getLogger(), logging.getLogger("acp_server")
    saved = (root.handlers[:], root.level, ours.level)
    yield root
    for handler in root.handlers[:]:
        if handler not in saved[0]:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(saved[1])
    ours.setLevel(saved[2])


def args(**options: object) -> argparse.Namespace:
    return argparse.Namespace(**options)


def record(text: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord("acp_server.test", level, __file__, 1, text, None, None)


def test_by_default_info_goes_to_the_state_directory_and_not_to_stderr(
    default_log_file: Path,
) -> None:
    plan = log_plan(args(), {})
    assert plan == LogPlan(level=logging.INFO, file=default_log_file)


def test_the_level_comes_from_the_option_then_acp_server_log_then_the_older_name() -> None:
    env = {"ACP_SERVER_LOG": "warning", "ACP_SERVER_LOG_LEVEL": "error"}
    assert log_plan(args(log_level="debug"), env).level == logging.DEBUG
    assert log_plan(args(), env).level == logging.WARNING
    assert log_plan(args(), {"ACP_SERVER_LOG_LEVEL": "ERROR"}).level == logging.ERROR


def test_a_log_file_named_without_a_level_gets_everything(tmp_path: Path) -> None:
    plan = log_plan(args(log_file=tmp_path / "x.log"), {})
    assert (plan.level, plan.file) == (logging.DEBUG, tmp_path / "x.log")


def test_stderr_is_used_only_when_asked() -> None:
    assert not log_plan(args(), {"ACP_SERVER_LOG_STDERR": "0"}).stderr
    assert log_plan(args(), {"ACP_SERVER_LOG_STDERR": "1"}).stderr
    assert log_plan(args(log_stderr=True), {}).stderr


def test_a_misspelt_level_is_an_error_naming_where_it_came_from() -> None:
    with pytest.raises(LogSetupError, match=r"ACP_SERVER_LOG is 'verbose'.*debug, info"):
        log_plan(args(), {"ACP_SERVER_LOG": "verbose"})


def test_the_file_rotates_and_keeps_a_few_old_ones(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "acp-server.log"
    handler = LogFile(path, max_bytes=2_000, backups=2)
    for n in range(200):
        handler.handle(record(f"line {n} " + "x" * 40))
    handler.close()
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["acp-server.log", "acp-server.log.1", "acp-server.log.2"]
    assert all(p.stat().st_size <= 2_000 for p in path.parent.iterdir())
    assert "line 199 " in path.read_text("utf-8")


def test_nothing_is_opened_before_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "later" / "acp-server.log"
    handler = LogFile(path)
    assert not path.parent.exists()
    handler.handle(record("now"))
    handler.close()
    assert "INFO acp_server.test: now" in path.read_text("utf-8")


def test_the_header_comes_first_when_the_file_opens_and_on_stderr_too(
    tmp_path: Path, root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = LogPlan(logging.INFO, tmp_path / "acp-server.log", stderr=True, third_party=False)
    configure_logging(plan, header="acp-server 9.9 serving")
    assert not plan.file.exists()  # written at the first line, not at start
    logging.getLogger("acp_server.test").warning("first line")
    logging.getLogger("acp_server.test").warning("second line")
    lines = plan.file.read_text("utf-8").splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "acp-server 9.9 serving",
        "first line",
        "second line",
    ]
    err = capsys.readouterr().err
    assert err.index("acp-server 9.9 serving") < err.index("first line")


def test_a_file_that_cannot_be_written_is_said_once_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    handler = LogFile(blocker / "acp-server.log")
    for n in range(3):
        handler.handle(record(f"line {n}"))
    handler.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"cannot write the log file {blocker / 'acp-server.log'}" in err
    assert "--log-file" in err and "Traceback" not in err


def test_keys_and_authorization_headers_are_redacted_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root_logger: logging.Logger
) -> None:
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    path = tmp_path / "a.log"
    configure_logging(LogPlan(level=logging.DEBUG, file=path))
    logging.getLogger("acp_server.test").debug("sent %s; Authorization: Basic abcdefghijk", key)
    for handler in root_logger.handlers:
        handler.flush()
    text = path.read_text("utf-8")
    assert key not in text and "abcdefghijk" not in text
    assert text.count(redaction.REDACTED) == 2
