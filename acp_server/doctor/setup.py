"""The doctor's view of the configuration: the file (its mistakes with key and line, as
`configfile` words them) and the models the command line, ACP_SERVER_MODEL and the file name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from acp_server.config.file import Config, ConfigError, config_path, load_config
from acp_server.doctor import Check, fail, ok
from acp_server.models.catalogue import (
    MODEL_ENV,
    Catalogue,
    ModelChoiceError,
    build_catalogue,
    model_values,
)


@dataclass(frozen=True)
class Setup:
    """What the server would start with; `config` falls back to the built-in providers when
    the file is broken, so the servers can still be checked."""

    config: Config
    catalogue: Catalogue
    checks: tuple[Check, ...]
    named_by: str = "command line"  # where the models named came from: --model or the variable


def read_setup(option: Path | None, models: Sequence[str] | None, env: Mapping[str, str]) -> Setup:
    """The configuration file and the models named, checked."""
    path, named = config_path(str(option) if option else None, env)
    checks: list[Check] = []
    try:
        config = load_config(path, env, must_exist=named)
        checks.append(_file_found(config, path))
    except ConfigError as exc:
        config = load_config(None, env)
        checks.append(_file_broken(exc))
    try:
        catalogue = build_catalogue(model_values(models, env), config)
    except ModelChoiceError as exc:
        checks.append(fail("A model named on the command line or in ACP_SERVER_MODEL", str(exc)))
        catalogue = build_catalogue([], config)
    named_by = "--model" if models else MODEL_ENV
    return Setup(config, catalogue, tuple(checks), named_by)


def _file_found(config: Config, path: Path) -> Check:
    if config.stamp is None:
        return ok(
            f"Configuration file: none at {path} (optional: without one, models come from "
            "--model, ACP_SERVER_MODEL, keys in the environment and local servers)"
        )
    listed = f"{_count(len(config.models), 'model')}"
    own = [p.name for p in config.providers if p.origin != "built in"]
    if own:
        listed += f", providers {', '.join(own)}"
    return ok(f"Configuration file: {path} reads fine ({listed})")


def _file_broken(exc: ConfigError) -> Check:
    advice = "\n".join(exc.problems)
    return fail(
        f"Configuration file: {exc.path} cannot be used, so the server would refuse every prompt",
        f"{advice}\nFix the file, then check it with `acp-server config`.",
    )


def _count(n: int, word: str) -> str:
    return f"1 {word}" if n == 1 else f"{n} {word}s"
