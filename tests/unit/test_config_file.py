"""The configuration file: where it is, what it may say, and how a mistake in it is reported."""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from acp_server import schemas
from acp_server.backends.selection.select import DIALECTS
from acp_server.config.file import (
    SCHEMA,
    Config,
    ConfigError,
    Price,
    changed_since,
    config_path,
    load_config,
)
from acp_server.config.show import render_effective
from acp_server.models.carryover import ID_STYLES
from acp_server.permissions import MODE_IDS
from acp_server.schemas import schema_dir
from acp_server.settings import FetchSettings
from acp_server.thought import LEVELS

GOOD = """\
default_model = "anthropic:claude-sonnet-4-5"
default_mode = "accept_edits"
compaction_model = "local:qwen3:4b"

[providers.openai]
base_url = "https://gateway.example.com/v1/"
api_key_env = "GATEWAY_KEY"
headers = { "X-Team" = "tools", "Authorization" = "Bearer abc123" }

[providers.local]
dialect = "openai"
base_url = "http://127.0.0.1:1234/v1"

[[models]]
provider = "anthropic"
id = "claude-sonnet-4-5"
name = "Sonnet 4.5"
window = 200000
reply_reserve = 8192
price = { input = 3, output = 15 }
reasoning = ["off", "low", "medium", "high"]

[[models]]
provider = "local"
id = "qwen3:4b"
images = false
tool_call_ids = "mistral"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def only_problem(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), {})
    assert len(caught.value.problems) == 1, caught.value.problems
    return caught.value.problems[0]


def test_without_a_file_the_environment_users_already_set_keeps_working() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OLLAMA_HOST": "gpu-box"}
    config = load_config(None, env)
    openai, ollama, anthropic = (config.provider(n) for n in ("openai", "ollama", "anthropic"))
    assert openai and openai.base_url == "http://127.0.0.1:8080/v1"
    assert openai.api_key_env == "OPENAI_API_KEY"
    assert ollama and ollama.base_url == "http://gpu-box:11434"
    assert anthropic and anthropic.base_url == "https://api.anthropic.com"
    assert config.models == () and config.default_model is None


def test_a_missing_default_file_is_fine_but_a_named_one_is_an_error(tmp_path: Path) -> None:
    assert load_config(tmp_path / "absent.toml", {}).models == ()
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml", {}, must_exist=True)


def test_the_path_comes_from_the_option_then_the_variable_then_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"ACP_SERVER_CONFIG": "/etc/acp.toml"}
    assert config_path("~/my.toml", env) == (Path.home() / "my.toml", True)
    assert config_path(None, env) == (Path("/etc/acp.toml"), True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config_path(None, {}) == (tmp_path / "acp-server" / "config.toml", False)


def test_a_provider_entry_points_a_built_in_one_at_a_gateway(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD), {"OPENAI_BASE_URL": "http://ignored/v1"})
    openai = config.provider("openai")
    assert openai is not None
    assert (openai.dialect, openai.base_url) == ("openai", "https://gateway.example.com/v1")
    assert openai.api_key_env == "GATEWAY_KEY"
    assert dict(openai.headers)["X-Team"] == "tools"
    assert openai.origin == "built in, changed by the file"
    local = config.provider("local")
    assert local is not None and local.api_key_env is None and local.origin == "the file"


def test_models_and_defaults_are_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD), {})
    sonnet, qwen = config.models
    assert sonnet.value == "anthropic:claude-sonnet-4-5" and sonnet.name == "Sonnet 4.5"
    assert (sonnet.window, sonnet.reply_reserve, sonnet.price) == (200000, 8192, Price(3, 15))
    assert sonnet.reasoning == ("off", "low", "medium", "high")
    assert (qwen.value, qwen.images, qwen.tool_call_ids) == ("local:qwen3:4b", False, "mistral")
    assert (config.default_mode, config.compaction_model) == ("accept_edits", "local:qwen3:4b")


def test_the_fetch_table_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[fetch]\nenabled = false\nallow_private = true\n", encoding="utf-8")
    assert load_config(path, {}).fetch == FetchSettings(enabled=False, allow_private=True)
    path.write_text("[fetch]\nallow_privat = true\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="allow_privat"):
        load_config(path, {})


def test_command_env_names_the_variables_commands_may_see(tmp_path: Path) -> None:
    path = write(tmp_path, 'command_env = ["NPM_CONFIG_REGISTRY", "CARGO_*"]\n')
    assert load_config(path, {}).command_env == ("NPM_CONFIG_REGISTRY", "CARGO_*")
    assert "command_env" in only_problem(tmp_path, 'command_env = ["NOT A NAME"]\n')


# ----- five broken files, one problem each, naming the key and the line ------------------------


def test_a_value_of_the_wrong_type(tmp_path: Path) -> None:
    problem = only_problem(
        tmp_path,
        """\
        [[models]]
        provider = "openai"
        id = "a"

        [[models]]
        provider = "openai"
        id = "b"
        window = "large"
        """,
    )
    assert problem == "line 8, `models[1].window`: must be an integer"


def test_a_misspelt_key(tmp_path: Path) -> None:
    problem = only_problem(
        tmp_path,
        """\
        [providers.gateway]
        dialect = "openai"
        base_url = "https://gw.example/v1"
        api_key_envv = "GW_KEY"
        """,
    )
    assert problem.startswith("line 4, `providers.gateway.api_key_envv`: unknown setting")


def test_an_api_key_in_the_file_is_refused_without_repeating_it(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, '[providers.openai]\napi_key = "sk-secret-123"\n')
    assert problem.startswith("line 2, `providers.openai.api_key`: API keys are not kept")
    assert "api_key_env" in problem and "sk-secret-123" not in problem


def test_a_model_on_a_provider_that_does_not_exist(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, '[[models]]\nid = "x"\nprovider = "gatway"\n')
    assert problem.startswith("line 3, `models[0].provider`: there is no provider 'gatway'")
    assert "[providers.gatway]" in problem


def test_a_mode_that_does_not_exist(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, '# my settings\n\ndefault_mode = "yolo"\n')
    assert problem.startswith("line 3, `default_mode`: must be one of")
    assert '"accept_edits"' in problem


def test_a_file_that_is_not_toml_names_the_line_and_the_key(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, '[[models]]\nprovider = "openai"\nwindow = \n')
    assert problem.startswith("line 3 (at `window`): this is not valid TOML")


def test_more_mistakes_each_named(tmp_path: Path) -> None:
    new_provider = only_problem(tmp_path, '\n[providers.lab]\nbase_url = "http://lab:8000/v1"\n')
    assert new_provider.startswith("line 2, `providers.lab`: `dialect` is required")
    level = only_problem(
        tmp_path, '[[models]]\nprovider = "openai"\nid = "o3"\nreasoning = ["low", "extreme"]\n'
    )
    assert level.startswith("line 4, `models[0].reasoning[1]`: must be one of")
    url = only_problem(tmp_path, '[providers.ollama]\nbase_url = "localhost:11434"\n')
    assert url.startswith("line 2, `providers.ollama.base_url`: 'localhost:11434' is not")
    assert "http://" in url
    twice = only_problem(
        tmp_path,
        '[[models]]\nprovider = "openai"\nid = "a"\n[[models]]\nprovider = "openai"\nid = "a"\n',
    )
    assert twice == "line 6, `models[1].id`: openai:a is listed twice"
    reserve = only_problem(
        tmp_path,
        '[[models]]\nprovider = "openai"\nid = "a"\nwindow = 8000\nreply_reserve = 4000\n',
    )
    assert reserve.startswith("line 5, `models[0].reply_reserve`: the reply reserve (4,000)")


def test_the_error_says_what_to_do_and_lists_every_problem(tmp_path: Path) -> None:
    path = write(tmp_path, 'default_mode = "yolo"\n[[models]]\nprovider = "nope"\nid = "x"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    message = str(caught.value)
    assert str(path) in message and "fix it" in message
    assert "`default_mode`" in message  # the schema problem is reported...
    # ...and the meaning is only checked once the shape is right.
    assert len(caught.value.problems) == 1


# ----- reloading and showing -------------------------------------------------------------------


def test_a_changed_file_is_noticed(tmp_path: Path) -> None:
    path = write(tmp_path, 'default_mode = "ask"\n')
    config = load_config(path, {})
    assert not changed_since(config)
    path.write_text('default_mode = "plan"\n# longer now\n', encoding="utf-8")
    assert changed_since(config)
    assert load_config(path, {}).default_mode == "plan"
    path.unlink()
    assert changed_since(config)


def test_a_file_created_after_start_is_noticed(tmp_path: Path) -> None:
    config = load_config(tmp_path / "config.toml", {})
    assert not changed_since(config)
    write(tmp_path, 'default_mode = "plan"\n')
    assert changed_since(config)
    assert not changed_since(Config(()))  # no file to watch at all


def test_the_effective_configuration_is_shown_without_secrets(tmp_path: Path) -> None:
    text = GOOD.replace("https://gateway", "https://me:hunter2@gateway")
    config = load_config(write(tmp_path, text), {})
    shown = render_effective(config, {"GATEWAY_KEY": "sk-live-999"})
    assert "sk-live-999" not in shown and "hunter2" not in shown and "abc123" not in shown
    assert 'api_key_env = "GATEWAY_KEY"  # set' in shown
    assert 'api_key_env = "ANTHROPIC_API_KEY"  # NOT SET' in shown
    parsed = tomllib.loads(shown)
    assert parsed["providers"]["local"]["base_url"] == "http://127.0.0.1:1234/v1"
    assert parsed["models"][0]["price"] == {"input": 3.0, "output": 15.0}
    assert parsed["default_mode"] == "accept_edits"


def test_a_model_without_a_window_is_shown_with_the_catalogues(tmp_path: Path) -> None:
    text = '[[models]]\nprovider = "openai"\nid = "gpt-4.1"\n'
    text += '[[models]]\nprovider = "openai"\nid = "o3"\nwindow = 100000\n'
    shown = render_effective(load_config(write(tmp_path, text), {}), {})
    assert "# window: 1,047,576 tokens unless its server says, from the model catalogue" in shown
    assert shown.count("# window:") == 1  # o3's own window is shown as configured
    assert tomllib.loads(shown)["models"][1]["window"] == 100000


def test_the_schema_lists_what_the_code_knows() -> None:
    schema = json.loads((schema_dir() / "config.schema.json").read_text(encoding="utf-8"))
    model = schema["$defs"]["model"]["properties"]
    assert tuple(schema["properties"]["default_mode"]["enum"]) == MODE_IDS
    assert tuple(model["reasoning"]["items"]["enum"]) == LEVELS
    assert tuple(model["tool_call_ids"]["enum"]) == ID_STYLES
    assert set(schema["$defs"]["provider"]["properties"]["dialect"]["enum"]) == set(DIALECTS)


def test_the_quick_interpreter_accepts_a_sound_file_and_leaves_mistakes_to_jsonschema() -> None:
    schema = schemas.load(SCHEMA)
    sound = {
        "default_mode": "plan",
        "providers": {"gw": {"dialect": "openai", "base_url": "https://gw.example/v1"}},
        "models": [{"provider": "gw", "id": "m", "name": "M", "reasoning": ["low", "high"]}],
    }
    assert schemas.quick_accept(schema, sound)
    broken: list[dict[str, Any]] = [
        {"providers": {"Bad Name": {"dialect": "openai", "base_url": "https://x/v1"}}},
        {"providers": {"gw": {"dialect": "openai", "base_url": "gw.example"}}},
        {"models": [{"provider": "gw", "id": "m", "name": "n" * 33}]},
        {"models": [{"provider": "gw", "id": "m", "reasoning": ["low", "low"]}]},
    ]
    for data in broken:
        assert not schemas.quick_accept(schema, data), data
        assert list(schemas.validator(SCHEMA).iter_errors(data)), data
