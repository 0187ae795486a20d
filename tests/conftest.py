"""Shared fixtures. `conformance` validates every frame the server writes in a test."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_schema import official_validator
from tests.support.llama_server import llama_server  # noqa: F401  (the real model tier)
from tests.support.mock_llm import mock_llm  # noqa: F401 - a fixture for every test module
from tests.support.raw import RawServer, console_script
from tests.support.search_engines import engine  # noqa: F401 - rg and Python, for search tests
from tests.support.unprivileged import remove_folders

TAP = Path(__file__).parent / "support" / "tap.py"
# Commands run as before the sandbox (each one asks) unless a test chooses a level: the agents
# the tests start inherit this; the sandbox's own tests set ACP_SERVER_SANDBOX themselves.
os.environ.setdefault("ACP_SERVER_SANDBOX", "off")
FIGURES = pytest.StashKey[list[str]]()


class Conformance:
    """Collects wire traffic (from taps and from raw clients) and checks it at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.captures: list[Path] = []
        self.observed: list[tuple[str, str]] = []

    def server_argv(self, *args: str) -> list[str]:
        """argv that runs the real console script behind a recording wire tap."""
        capture = self.tmp_path / f"wire-{len(self.captures)}.jsonl"
        capture.touch()
        self.captures.append(capture)
        return [sys.executable, str(TAP), str(capture), "--", console_script(), *args]

    def observe(self, side: str, line: str) -> None:
        self.observed.append((side, line))

    def traffic(self) -> list[list[tuple[str, str]]]:
        streams = [self.observed]
        for capture in self.captures:
            rows = [json.loads(line) for line in capture.read_text("utf-8").splitlines()]
            streams.append([(row["from"], row["line"]) for row in rows])
        return streams


@pytest.fixture(scope="session", autouse=True)
def unprivileged_folders() -> Iterator[None]:
    """The folders made for the unprivileged user's servers go at the end of the run (their
    servers are stopped by then: every fixture that starts one is narrower)."""
    yield
    remove_folders()


@pytest.fixture(autouse=True)
def private_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test (and every server it starts) keeps sessions and rules in its own folder."""
    data = tmp_path / "acp-data"
    monkeypatch.setenv("ACP_SERVER_DATA_DIR", str(data))
    return data


@pytest.fixture(scope="session", autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Servers started by fixtures wider than a test (a module's recorded sessions) log into
    the run's own folder too, never the developer's ~/.local/state."""
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        yield state


@pytest.fixture(autouse=True)
def default_log_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every server a test starts logs into the test's own state folder, at the default level
    (whatever the developer's environment says); returns the default log file's path."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for variable in ("ACP_SERVER_LOG", "ACP_SERVER_LOG_LEVEL", "ACP_SERVER_LOG_STDERR"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path / "state" / "acp-server" / "log" / "acp-server.log"


@pytest.fixture
def conformance(tmp_path: Path) -> Iterator[Conformance]:
    validator = official_validator()  # fails, saying where it looked, without the schema
    recorder = Conformance(tmp_path)
    yield recorder
    problems: list[str] = []
    for stream in recorder.traffic():
        problems += validator.check_traffic(stream)
    if problems:
        pytest.fail("frames that break the ACP schema:\n" + "\n".join(problems[:20]))


@pytest.fixture
def script(tmp_path: Path) -> Callable[[list[dict[str, Any]]], Path]:
    """Write scripted-backend rounds to a file and return its path."""

    def write(rounds: list[dict[str, Any]]) -> Path:
        path = tmp_path / f"script-{len(list(tmp_path.glob('script-*.json')))}.json"
        path.write_text(json.dumps(rounds), encoding="utf-8")
        return path

    return write


@pytest.fixture
async def server_factory(
    conformance: Conformance,
) -> AsyncIterator[Callable[..., Any]]:
    """Start real servers (raw pipes) whose traffic the conformance fixture checks."""
    started: list[RawServer] = []

    async def start(*args: str, **kw: Any) -> RawServer:
        server = await RawServer.start(conformance, *args, **kw)
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()


@pytest.fixture
def figures(request: pytest.FixtureRequest, record_property: Any) -> Callable[[str, Any], None]:
    """Report a measured figure (load tests): on stderr (shown when the test fails), as a
    property of the test in JUnit XML, and in a "load figures" section at the end of the run."""

    def note(name: str, value: Any) -> None:
        line = f"{request.node.nodeid}: {name}: {value}"
        record_property(name, value)
        request.config.stash.setdefault(FIGURES, []).append(line)
        print(line, file=sys.stderr)

    return note


def pytest_configure(config: pytest.Config) -> None:
    """Every test has a time limit (pyproject.toml's `timeout`): without pytest-timeout a hung
    test would hold the run for ever, so the run does not start without it."""
    if not config.pluginmanager.hasplugin("timeout"):
        raise pytest.UsageError(
            "pytest-timeout is not installed, and it gives every test its time limit: install "
            "the test extra (pip install -e '.[test]', or scripts/install-test-deps), then run "
            "pytest again."
        )


# The test files that wait on a real model for minutes: on several workers (scripts/check:
# pytest-xdist, a file per worker), xdist hands out the files with the most tests first, so these
# two-test files came last and the whole run waited on them alone; they are handed out first.
LONG_FILES = ("tests/e2e/test_real_model.py", "tests/e2e/test_tool_model.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class LongFilesFirst(LoadFileScheduling):  # type: ignore[misc]
        def _assign_work_unit(self, node: Any) -> None:
            for scope in [s for s in self.workqueue if s.endswith(LONG_FILES)]:
                self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    if config.getoption("dist") != "loadfile":
        return None  # another distribution asked for: xdist's own
    return LongFilesFirst(config, log)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lines = config.stash.get(FIGURES, [])
    if lines:
        terminalreporter.section("load figures")
        for line in lines:
            terminalreporter.write_line(line)
