"""The model catalogue and the `model` / `thought_level` config options built from it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from acp_server import redaction
from acp_server.config.file import Config, ModelConfig, Price, load_config
from acp_server.errors import InvalidParams
from acp_server.models.carryover import Target
from acp_server.models.catalogue import (
    NAME_LIMIT,
    Catalogue,
    ModelChoiceError,
    UnknownModel,
    build_catalogue,
    model_option,
    model_options,
    model_values,
    parse_level,
    split_value,
)
from acp_server.session.options import config_options
from acp_server.settings import Settings
from tests.support.acp_schema import WireValidator, schema_path

CLI = ["openai:gpt-4.1", "anthropic:claude-sonnet-4-5", "ollama:hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M"]
CONFIG = """\
[providers.local]
dialect = "openai"
base_url = "http://127.0.0.1:1234/v1"

[[models]]
provider = "anthropic"
id = "claude-sonnet-4-5"
name = "Sonnet 4.5"
window = 200000
price = { input = 3, output = 15 }

[[models]]
provider = "local"
id = "qwen3:8b"
images = false
tool_call_ids = "mistral"
reasoning = ["off", "on"]

[[models]]
provider = "ollama"
id = "qwen3:8b"
"""


def configured(tmp_path: Path, text: str = CONFIG) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, {})


def no_file() -> Config:
    return load_config(None, {})


def schema_problems(options: list[dict[str, Any]]) -> list[str]:
    validator = WireValidator(schema_path())
    return [
        e.message
        for e in validator.for_type("SetSessionConfigOptionResponse").iter_errors(
            {"configOptions": options}
        )
    ]


def test_models_come_from_repeated_flags_or_a_comma_separated_variable() -> None:
    env = {"ACP_SERVER_MODEL": "ollama:qwen3:8b, openai:gpt-4.1 ,"}
    assert model_values(None, env) == ["ollama:qwen3:8b", "openai:gpt-4.1"]
    assert model_values(["anthropic:claude-x"], env) == ["anthropic:claude-x"]
    assert model_values(None, {}) == []


def test_command_line_values_are_kept_verbatim_and_split_at_the_first_colon() -> None:
    catalogue = build_catalogue(CLI, no_file())
    assert [e.value for e in catalogue.entries] == CLI
    assert catalogue.default == "openai:gpt-4.1"
    qwen = catalogue.entries[2]
    assert (qwen.dialect, qwen.model) == ("ollama", "hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M")
    assert build_catalogue(CLI, no_file()) == catalogue  # the same ids every time


def test_a_malformed_model_says_how_to_write_one() -> None:
    with pytest.raises(ModelChoiceError, match="PROVIDER:MODEL"):
        build_catalogue(["gpt-4.1"], no_file())
    with pytest.raises(ModelChoiceError, match="openai, anthropic, ollama"):
        split_value("mistral:large", {p.name: p for p in no_file().providers})


def test_configured_models_join_and_describe_the_command_line_ones(tmp_path: Path) -> None:
    catalogue = build_catalogue(["anthropic:claude-sonnet-4-5"], configured(tmp_path))
    values = [e.value for e in catalogue.entries]
    assert values == ["anthropic:claude-sonnet-4-5", "local:qwen3:8b", "ollama:qwen3:8b"]
    sonnet = catalogue.entries[0]
    assert (sonnet.name, sonnet.window, sonnet.price) == ("Sonnet 4.5", 200000, Price(3, 15))
    assert "200k context" in sonnet.description()
    assert "$3 in, $15 out per million tokens" in sonnet.description()
    assert catalogue.entries[1].target() == Target("openai", "qwen3:8b", False, "mistral")
    assert "text only" in catalogue.entries[1].description()
    unknown = catalogue.entries[2]  # nobody said whether it reads images: it is not claimed
    assert "image" not in unknown.description() and unknown.target().images


def test_the_default_is_the_first_flag_then_the_files_choice_then_its_first_model(
    tmp_path: Path,
) -> None:
    config = configured(tmp_path)
    assert build_catalogue([], config).default == "anthropic:claude-sonnet-4-5"
    chosen = configured(tmp_path, 'default_model = "ollama:llama3"\n' + CONFIG)
    assert build_catalogue([], chosen).default == "ollama:llama3"
    assert build_catalogue(["openai:o3"], chosen).default == "openai:o3"
    assert build_catalogue([], no_file()).default is None


def test_clashing_names_are_told_apart(tmp_path: Path) -> None:
    catalogue = build_catalogue(["openai:a/llama", "openai:b/llama"], configured(tmp_path))
    names = {e.value: e.name for e in catalogue.entries}
    assert names["openai:a/llama"] == "a/llama" and names["openai:b/llama"] == "b/llama"
    assert names["local:qwen3:8b"] == "qwen3:8b (local)"
    assert names["ollama:qwen3:8b"] == "qwen3:8b (ollama)"


def test_long_names_are_cut_in_the_middle_keeping_the_variant() -> None:
    value = "ollama:hf.co/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF:UD-Q4_K_XL"
    (entry,) = build_catalogue([value], no_file()).entries
    assert len(entry.name) == NAME_LIMIT and "…" in entry.name
    assert entry.name.startswith("Qwen3-Coder") and entry.name.endswith("Q4_K_XL")


@pytest.mark.parametrize("seed", range(20))
def test_display_names_are_always_short_and_distinct(seed: int) -> None:
    rng = random.Random(seed)
    parts = ["qwen3", "llama-3.3-70b-instruct-very-long-name", "x", "org/model", "hf.co/a/b"]
    values = sorted(
        {
            f"{rng.choice(['openai', 'ollama', 'anthropic'])}:"
            f"{rng.choice(parts)}{rng.choice(['', ':8b', ':Q4_K_M-with-a-long-tail'])}"
            for _ in range(12)
        }
    )
    names = [e.name for e in build_catalogue(values, no_file()).entries]
    assert len(set(names)) == len(names), names
    assert all(0 < len(n) <= NAME_LIMIT for n in names)


def test_the_options_validate_against_the_official_schema_beside_mode(tmp_path: Path) -> None:
    catalogue = build_catalogue(CLI, configured(tmp_path))
    for entry in catalogue.entries:
        options = [*config_options("ask"), *model_options(catalogue, entry, "high")]
        assert schema_problems(options) == []


def test_models_are_grouped_by_provider(tmp_path: Path) -> None:
    catalogue = build_catalogue(CLI, configured(tmp_path))
    (model, *_) = model_options(catalogue, catalogue.entries[0], None)
    assert (model["id"], model["category"], model["currentValue"]) == (
        "model",
        "model",
        "openai:gpt-4.1",
    )
    groups = {g["group"]: g for g in model["options"]}
    assert list(groups) == ["openai", "anthropic", "ollama", "local"]
    assert groups["local"]["name"] == "local · 127.0.0.1:1234"
    assert groups["anthropic"]["name"] == "Anthropic"
    assert [v["value"] for v in groups["ollama"]["options"]] == [CLI[2], "ollama:qwen3:8b"]


def test_thought_level_is_offered_only_for_models_that_think_and_clamped_on_a_switch(
    tmp_path: Path,
) -> None:
    catalogue = build_catalogue(["openai:gpt-4.1", "openai:o3"], configured(tmp_path))
    gpt, o3, toggle = (catalogue.find(v) for v in ("openai:gpt-4.1", "openai:o3", "local:qwen3:8b"))
    assert gpt and o3 and toggle
    assert [o["id"] for o in model_options(catalogue, gpt, "high")] == ["model"]
    _, level = model_options(catalogue, o3, "max")
    assert (level["category"], level["currentValue"]) == ("thought_level", "high")
    assert [v["value"] for v in level["options"]] == ["low", "medium", "high"]
    _, level = model_options(catalogue, toggle, "high")
    assert level["currentValue"] == "on"


def test_an_unknown_model_is_invalid_params_naming_it() -> None:
    catalogue = build_catalogue(CLI, no_file())
    with pytest.raises(UnknownModel) as caught:
        catalogue.resolve("mistral:large")
    assert caught.value.code == -32602 and "'mistral:large'" in caught.value.message
    with pytest.raises(UnknownModel):
        catalogue.resolve(42)


def test_a_saved_choice_on_a_known_provider_is_accepted_before_discovery_finds_it() -> None:
    catalogue = build_catalogue(CLI, no_file())
    entry = catalogue.resolve("ollama:llama3.2:3b")
    assert (entry.value, entry.model, entry.name) == (
        "ollama:llama3.2:3b",
        "llama3.2:3b",
        "llama3.2:3b",
    )
    (model,) = model_options(catalogue, entry, None)
    ollama = next(g for g in model["options"] if g["group"] == "ollama")
    assert "ollama:llama3.2:3b" in [v["value"] for v in ollama["options"]]
    assert schema_problems([model]) == []


def test_a_level_the_model_lacks_is_invalid_params() -> None:
    catalogue = build_catalogue(["openai:o3", "openai:gpt-4.1"], no_file())
    o3, gpt = catalogue.entries
    assert parse_level("low", o3) == "low"
    with pytest.raises(InvalidParams, match="one of low, medium, high; got 'max'"):
        parse_level("max", o3)
    with pytest.raises(InvalidParams, match="does not think first"):
        parse_level("low", gpt)


def test_discovered_models_are_added_once_and_named_apart() -> None:
    catalogue = build_catalogue(["ollama:qwen3:8b"], no_file())
    grown = catalogue.with_discovered(
        [
            ModelConfig("ollama", "qwen3:8b", window=4096),  # already there: kept as it was
            ModelConfig("openai", "qwen3:8b"),
            ModelConfig("nowhere", "x"),  # no such provider: ignored
        ]
    )
    assert [e.value for e in grown.entries] == ["ollama:qwen3:8b", "openai:qwen3:8b"]
    assert grown.entries[0].window is None and grown.entries[1].origin == "discovered"
    assert len({e.name for e in grown.entries}) == 2
    assert isinstance(grown, Catalogue) and grown.default == catalogue.default


# ----- what the model catalogue adds ------------------------------------------------------------


def test_a_hosted_model_is_described_with_its_catalogue_window(tmp_path: Path) -> None:
    catalogue = build_catalogue(["openai:gpt-4.1", "anthropic:claude-sonnet-4-5"], no_file())
    gpt, _ = catalogue.entries
    assert gpt.known_window() == (1_047_576, "model catalogue")
    assert "1M context (model catalogue)" in gpt.description()
    assert "reads images" in gpt.description()
    sonnet = build_catalogue([], configured(tmp_path)).find("anthropic:claude-sonnet-4-5")
    assert sonnet is not None and "200k context (configured)" in sonnet.description()


def test_a_local_model_is_not_taken_for_a_catalogued_one(tmp_path: Path) -> None:
    qwen = build_catalogue([], configured(tmp_path)).find("ollama:qwen3:8b")
    assert qwen is not None and qwen.facts is None and qwen.known_window() == (None, "")


def test_the_reply_reserve_of_the_file_then_of_a_thinking_model() -> None:
    text = CONFIG + '\n[[models]]\nprovider = "openai"\nid = "gpt-4.1"\nreply_reserve = 3000\n'
    catalogue = build_catalogue(["openai:o3"], configured_text(text))
    gpt, o3 = catalogue.find("openai:gpt-4.1"), catalogue.find("openai:o3")
    assert gpt is not None and o3 is not None
    assert gpt.budget_settings(Settings()).reply_reserve == 3000
    assert o3.budget_settings(Settings()).reply_reserve == 16_384  # it thinks first
    assert gpt.budget_settings(Settings(reply_reserve=500)).reply_reserve == 500  # env wins
    plain = build_catalogue(["ollama:qwen3:8b"], no_file()).entries[0]
    assert plain.budget_settings(Settings()).reply_reserve is None  # relative to the window


def configured_text(text: str) -> Config:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        return configured(Path(folder), text)


def test_a_name_holding_a_secret_never_reaches_the_model_option() -> None:
    secret = "sk-option-secret-0123456789"
    redaction.remember_secret(secret)
    catalogue = build_catalogue([f"ollama:echo-{secret}"], no_file())
    option = model_option(catalogue, catalogue.entries[0])
    (shown,) = option["options"][0]["options"]
    assert secret not in shown["name"] and secret not in shown["description"]


def test_a_thinking_model_the_name_table_lacks_gets_levels_from_the_catalogue() -> None:
    catalogue = build_catalogue(
        ["anthropic:claude-sonnet-5", "openai:gpt-4.1", "openai:deepseek-reasoner"], no_file()
    )
    sonnet, gpt, deepseek = catalogue.entries
    assert sonnet.levels == ("off", "on", "low", "medium", "high") and sonnet.adaptive_thinking
    assert gpt.levels == () and deepseek.levels == ()  # no thinking / another vendor's knob
