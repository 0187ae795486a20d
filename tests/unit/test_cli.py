"""The command line: an editor's launch is parsed by the small serving parser, with the same
result as the full one; everything else (help, other commands, mistakes) by the full one."""

from __future__ import annotations

import argparse

import pytest

from acp_server.cli import build_parser, parse, serving_parser

SERVING = [
    [],
    ["--model", "openai:gpt-4.1-mini", "--model", "ollama:qwen3:8b"],
    ["acp"],
    ["serve", "--log-level", "debug", "--log-stderr"],
    ["--config", "/tmp/c.toml", "acp", "--context-window", "8192", "--sandbox", "off"],
    ["--max-turn-requests", "3", "--script", "rounds.json"],
]


@pytest.mark.parametrize("argv", SERVING)
def test_a_launch_is_parsed_as_the_full_parser_parses_it(argv: list[str]) -> None:
    assert serving_parser().parse_known_args(argv)[1] == []  # the small parser took it all
    assert vars(parse(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    "argv",
    [["run", "hello", "--yes"], ["sessions", "export", "abc"], ["login", "OPENAI_API_KEY"]],
)
def test_other_commands_go_to_the_full_parser(argv: list[str]) -> None:
    args = parse(argv)
    assert args.command == argv[0]
    assert vars(args) == vars(build_parser().parse_args(argv))


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        parse(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert all(word in out for word in ("run", "sessions", "doctor", "setup", "login"))


@pytest.mark.parametrize(
    "argv",
    [["--log-level", "loud"], ["--bogus"], ["--max-turn-requests", "0"], ["--log"]],
)
def test_a_mistake_is_worded_by_the_full_parser(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    assert stop.value.code == 2
    assert "usage: acp-server" in capsys.readouterr().err


def test_the_serving_parser_raises_instead_of_exiting() -> None:
    with pytest.raises(argparse.ArgumentError):
        serving_parser().parse_known_args(["--log-level", "loud"])
