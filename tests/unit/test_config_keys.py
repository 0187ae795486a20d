"""Storing keys in the configuration file: made private, its other lines kept, read back as the
variable they stand in for, and never shown."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from acp_server import redaction
from acp_server.config.file import load_config
from acp_server.config.keys import KeyFileError, remove_keys, set_default_model, store_key
from acp_server.config.show import render_effective

KEY = "sk-unit-test-key-000111222"
EXISTING = """# my settings
default_mode = "plan"  # careful

[providers.gw]
dialect = "openai"
base_url = "https://gw.example.com/v1"
api_key_env = "GW_KEY"
"""


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_is_made_readable_only_by_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "acp-server" / "config.toml"
    store_key(path, "OPENAI_API_KEY", KEY)
    assert mode(path) == 0o600
    assert load_config(path, {}).environ({}) == {"OPENAI_API_KEY": KEY}


def test_the_file_keeps_its_lines_and_becomes_private(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(EXISTING, encoding="utf-8")
    path.chmod(0o644)
    store_key(path, "GW_KEY", KEY)
    text = path.read_text("utf-8")
    assert text.startswith(EXISTING) and mode(path) == 0o600
    store_key(path, "GW_KEY", KEY + "-new")  # replaced, not added
    store_key(path, "OTHER_KEY", "x")
    config = load_config(path, {})
    assert config.environ({}) == {"GW_KEY": KEY + "-new", "OTHER_KEY": "x"}
    assert config.default_mode == "plan"


def test_the_environment_wins_over_a_stored_key(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    store_key(path, "GW_KEY", KEY)
    assert load_config(path, {}).environ({"GW_KEY": "from-env"}) == {"GW_KEY": "from-env"}


def test_a_stored_key_is_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    store_key(path, "GW_KEY", KEY)
    config = load_config(path, {})
    assert KEY not in repr(config)
    assert KEY not in redaction.redact(f"the server said: bad key {KEY}")


def test_remove_takes_out_only_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(EXISTING, encoding="utf-8")
    store_key(path, "GW_KEY", KEY)
    store_key(path, "OTHER_KEY", "y")
    assert remove_keys(path, ["OTHER_KEY"]) == ["OTHER_KEY"]
    assert remove_keys(path) == ["GW_KEY"]
    assert remove_keys(path) == []
    assert path.read_text("utf-8") == EXISTING  # no empty [keys] table left behind


def test_the_last_key_removed_takes_its_table_unless_something_else_is_in_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    tables = EXISTING.split("\n\n", 1)  # the top-level lines, then [providers.gw]
    path.write_text(f'{tables[0]}\n\n[keys]\nGW_KEY = "x"\n\n{tables[1]}', encoding="utf-8")
    assert remove_keys(path) == ["GW_KEY"]
    assert path.read_text("utf-8") == EXISTING
    path.write_text(f'{EXISTING}\n[keys]\n# kept by hand\nGW_KEY = "x"\n', encoding="utf-8")
    assert remove_keys(path) == ["GW_KEY"]
    assert path.read_text("utf-8") == f"{EXISTING}\n[keys]\n# kept by hand\n"
    only = tmp_path / "only.toml"
    store_key(only, "GW_KEY", KEY)
    assert remove_keys(only) == ["GW_KEY"] and only.read_text("utf-8") == ""


def test_a_bad_variable_name_or_a_broken_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with pytest.raises(KeyFileError, match="not an environment variable"):
        store_key(path, "bad name", KEY)
    path.write_text("default_mode = \n", encoding="utf-8")
    with pytest.raises(KeyFileError, match="not valid TOML"):
        store_key(path, "GW_KEY", KEY)
    assert path.read_text("utf-8") == "default_mode = \n"


def test_the_shown_configuration_says_a_key_is_stored_without_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(EXISTING, encoding="utf-8")
    store_key(path, "GW_KEY", KEY)
    shown = render_effective(load_config(path, {}), {})
    said = "stored in this file's [keys] (by `acp-server login` or `setup`)"
    assert f'api_key_env = "GW_KEY"  # {said}' in shown
    assert KEY not in shown


def test_the_default_model_is_set_before_the_first_table_keeping_every_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '# mine\ndefault_mode = "ask"\n\n[providers.x]\ndialect = "openai"\n'
        'base_url = "http://h/v1"\n',
        encoding="utf-8",
    )
    set_default_model(path, "x:m")
    text = path.read_text("utf-8")
    assert text.startswith('# mine\ndefault_mode = "ask"\n\ndefault_model = "x:m"\n\n[providers.x]')
    set_default_model(path, "lmstudio:q", ("lmstudio", "openai", "http://127.0.0.1:1234/v1"))
    config = load_config(path, {})
    assert config.default_model == "lmstudio:q" and "x:m" not in path.read_text("utf-8")
    assert config.provider("lmstudio") is not None
    assert config.provider("x") is not None and mode(path) == 0o600
