"""`acp-server sessions` with a wrong command line: one clear usage error, exit status 2."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.raw import console_script


def sessions(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), "sessions", *args],
        env={**os.environ, "ACP_SERVER_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["export"], "acp-server sessions export: error: the following arguments are required: ID"),
        (
            ["export", "x", "--format", "pdf"],
            "acp-server sessions export: error: argument --format",
        ),
        (["list", "--limit", "0"], "acp-server sessions list: error: argument --limit"),
    ],
)
def test_a_wrong_command_line_is_one_clear_usage_error(
    tmp_path: Path, args: list[str], error: str
) -> None:
    done = sessions(tmp_path, *args)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"usage: acp-server sessions {args[0]} ")
    assert lines[-1].startswith(error), done.stderr
    assert done.stderr.count("usage:") == 1 and done.stderr.count("error:") == 1
    assert done.stderr.count("acp-server sessions") == 2  # the usage line and the error line


def test_export_help_shows_its_own_usage(tmp_path: Path) -> None:
    done = sessions(tmp_path, "export", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: acp-server sessions export ID [--format markdown|json]")
