"""Finding a key's line again in TOML text (tomllib gives no positions)."""

from __future__ import annotations

import textwrap
import tomllib

from acp_server.config.tomllines import key_lines, line_of

TEXT = textwrap.dedent(
    """\
    # a comment with key = value in it
    default_model = "openai:gpt-4.1"   # trailing = comment

    [providers.openai]
    base_url = "https://x/v1?a=b"
    headers = { "X-A" = "1" }

    [providers."my.gw"]
    dialect = "openai"

    [[models]]
    provider = "openai"
    reasoning = [
      "low",
      "high",
    ]
    notes = \"\"\"
    fake = 1
    \"\"\"

    [[models]]
    provider = "ollama"
    price.input = 1
    price.output = 2

    [models.extra]
    a = 1
    """
)


def test_headers_arrays_of_tables_and_keys_are_placed() -> None:
    tomllib.loads(TEXT)  # the text really is TOML
    lines = key_lines(TEXT)
    assert lines[("default_model",)] == 2
    assert lines[("providers", "openai")] == 4
    assert lines[("providers", "openai", "base_url")] == 5
    assert lines[("providers", "my.gw", "dialect")] == 9
    assert lines[("models", 0)] == 11
    assert lines[("models", 0, "reasoning")] == 13
    assert lines[("models", 1, "provider")] == 22
    assert lines[("models", 1, "price", "output")] == 24
    assert lines[("models", 1, "extra", "a")] == 27


def test_the_inside_of_multiline_values_is_skipped() -> None:
    lines = key_lines(TEXT)
    assert ("models", 0, "fake") not in lines
    assert ("fake",) not in lines
    assert ("models", 0, "notes") in lines


def test_an_unknown_path_falls_back_to_the_nearest_known_one() -> None:
    lines = key_lines(TEXT)
    assert line_of(lines, ("providers", "openai", "headers", "X-A")) == 6
    assert line_of(lines, ("models", 0, "reasoning", 1)) == 13
    assert line_of(lines, ("nothing",)) is None
