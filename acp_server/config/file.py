"""The configuration file: providers, models and defaults, read from TOML and validated.

Where it is: `--config FILE`, else ACP_SERVER_CONFIG, else `config.toml` in the user's
configuration directory (XDG: `~/.config/acp-server/config.toml` on Linux). Without a file
everything still works as before: the built-in providers `openai`, `anthropic` and `ollama` take
their addresses from OPENAI_BASE_URL, ANTHROPIC_BASE_URL and OLLAMA_HOST and their keys from
OPENAI_API_KEY and ANTHROPIC_API_KEY. A `[providers.openai]` table in the file changes the
built-in provider (say, to point it at a gateway); other names add providers.

A provider names the environment variable holding its key (`api_key_env`). A key may also be
stored in the file's `[keys]` table, by variable name, with `acp-server login` (`configkeys`):
it stands in for the variable when the environment does not set it (`Config.environ`).

The file is described by `schemas/config.schema.json`; every problem is reported with the key
and the line it is on, so a person can fix the file without the code. A loaded `Config`
remembers the file's modification stamp: `changed_since` tells when new sessions should load it
again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import redaction, schemas
from acp_server.backends.providers import HOSTED as HOSTED
from acp_server.backends.providers import ModelConfig as ModelConfig
from acp_server.backends.providers import Price as Price
from acp_server.backends.providers import Provider as Provider
from acp_server.backends.providers import builtin_providers as builtin_providers
from acp_server.config.tomllines import KeyPath, key_lines, line_of
from acp_server.settings import FetchSettings

if TYPE_CHECKING:
    from jsonschema import ValidationError

    from acp_server.tools.mcp.config import ServerConfig

SCHEMA = "config.schema.json"
CONFIG_ENV = "ACP_SERVER_CONFIG"
FILE_NAME = "config.toml"
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password")


class ConfigError(Exception):
    """The configuration file cannot be used; `problems` says why, each with key and line."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = tuple(problems)
        listed = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"The configuration file {path} has {_count(len(problems))}; fix it and start "
            f"the session again:\n{listed}"
        )


@dataclass(frozen=True)
class Config:
    providers: tuple[Provider, ...]
    models: tuple[ModelConfig, ...] = ()
    default_model: str | None = None
    default_mode: str | None = None
    compaction_model: str | None = None
    subagent_model: str | None = None  # the model of the task tool's subagents
    mcp_servers: tuple[ServerConfig, ...] = ()  # [mcp_servers.NAME]
    fetch: FetchSettings = field(default_factory=FetchSettings)  # [fetch]
    sandbox: str | None = None  # the sandbox level of commands
    command_env: tuple[str, ...] = ()  # variables commands may see besides the allowlist
    mcp_tool_share: float | None = None  # of the window, for MCP tools (None: the default)
    path: Path | None = None  # the file read (None: no file, built-in defaults)
    stamp: tuple[int, int] | None = field(default=None, compare=False)  # (mtime ns, size)
    # Stored keys by variable name: never printed (repr), never compared.
    keys: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)

    def provider(self, name: str) -> Provider | None:
        return next((p for p in self.providers if p.name == name), None)

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with the stored keys for the variables it does not set."""
        return {**dict(self.keys), **{k: v for k, v in env.items() if v}}


def config_path(option: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The file to read, and whether it was named explicitly (then it must exist)."""
    named = option or env.get(CONFIG_ENV)
    if named:
        return Path(named).expanduser(), True
    if os.name != "nt":  # XDG, as platformdirs has it on Linux, without its ~8 ms import
        base = os.environ.get("XDG_CONFIG_HOME", "").strip() or "~/.config"
        return Path(base).expanduser() / "acp-server" / FILE_NAME, False
    from platformdirs import user_config_path

    return user_config_path("acp-server", appauthor=False) / FILE_NAME, False


def load_config(
    path: Path | None = None, env: Mapping[str, str] | None = None, *, must_exist: bool = False
) -> Config:
    """The configuration in `path` over the built-in defaults (only the defaults when there is
    no file, unless `must_exist`); raises ConfigError naming every problem."""
    env = os.environ if env is None else env
    builtins = builtin_providers(env)
    if path is None:
        return Config(tuple(builtins.values()))
    stamp = file_stamp(path)
    if stamp is None:
        if must_exist:
            raise ConfigError(path, ["the file does not exist (check the path)"])
        return Config(tuple(builtins.values()), path=path)
    text = path.read_text(encoding="utf-8", errors="replace")
    data = _parse(path, text)
    lines = key_lines(text)
    problems = _schema_problems(data, lines) or _meaning_problems(data, builtins, lines)
    if problems:
        raise ConfigError(path, sorted(problems, key=_line_number))
    return _build(data, builtins, path, stamp)


def file_stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def changed_since(config: Config) -> bool:
    """True when the file appeared, changed or went away since `config` was loaded."""
    return config.path is not None and file_stamp(config.path) != config.stamp


# ----- reading and checking ---------------------------------------------------------------------


def _parse(path: Path, text: str) -> dict[str, Any]:
    import tomllib  # only when there is a file: most set-ups have none (~2 ms at session/new)

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        detail = str(error)
        line = getattr(error, "lineno", None) or _line_in(detail)
        where = f"line {line}" if line else "somewhere"
        key = _key_on_line(text, line)
        about = f" (at `{key}`)" if key else ""
        raise ConfigError(path, [f"{where}{about}: this is not valid TOML: {detail}"]) from None


def _line_number(problem: str) -> int:
    """The line a problem names ("line 7, ..."), for listing problems in file order."""
    words = problem.split(",", 1)[0].split()
    return int(words[1]) if len(words) == 2 and words[1].isdigit() else 0


def _line_in(detail: str) -> int | None:
    marker = "at line "
    if marker not in detail:
        return None
    digits = detail.split(marker, 1)[1].split(",")[0].split(")")[0]
    return int(digits) if digits.isdigit() else None


def _key_on_line(text: str, line: int | None) -> str | None:
    if not line:
        return None
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    key = source.split("=", 1)[0].strip() if "=" in source else source.strip()
    return key or None


def _where(lines: dict[KeyPath, int], path: KeyPath) -> str:
    line = line_of(lines, path)
    key = schemas.field_path(path)
    return f"line {line}, `{key}`" if line else f"`{key}`"


def _schema_problems(data: dict[str, Any], lines: dict[KeyPath, int]) -> list[str]:
    if schemas.quick_accept(schemas.load(SCHEMA), data):
        return []  # a sound file never waits for jsonschema (~50 ms at every session/new)
    errors = sorted(
        schemas.validator(SCHEMA).iter_errors(data), key=lambda e: [str(p) for p in e.path]
    )
    problems: list[str] = []
    for error in errors:
        path: KeyPath = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            problems += [_unknown_key(lines, (*path, k)) for k in error.instance if k not in known]
            continue
        if error.validator == "required":
            missing = error.message.split("'")[1]
            problems.append(f"{_where(lines, path)}: `{missing}` is required here")
            continue
        if "propertyNames" in error.relative_schema_path:
            path = (*path, str(error.instance))
        problems.append(f"{_where(lines, path)}: {_explain(error)}")
    return problems


def _explain(error: ValidationError) -> str:
    """What is wrong with a value, for a person: a pattern is explained by its description."""
    if error.validator == "pattern" and isinstance(error.schema, dict):
        hint = error.schema.get("description") or "see schemas/config.schema.json"
        return f"{error.instance!r} is not written the right way: {hint}"
    if error.validator == "maxLength":
        return f"is longer than {error.validator_value} characters (editors cut it)"
    return schemas.describe((), error.message, error.validator, error.validator_value)


def _unknown_key(lines: dict[KeyPath, int], path: KeyPath) -> str:
    name = str(path[-1]).lower()
    if any(secret in name for secret in _SECRET_KEYS) and "env" not in name:
        return (
            f"{_where(lines, path)}: API keys are not kept in the configuration file. Put the "
            "key in an environment variable and name the variable with `api_key_env`."
        )
    return f"{_where(lines, path)}: unknown setting (check the spelling)"


def _meaning_problems(
    data: dict[str, Any], builtins: dict[str, Provider], lines: dict[KeyPath, int]
) -> list[str]:
    """What the schema cannot check: new providers complete, models on known providers,
    no model or name twice."""
    problems: list[str] = []
    providers: dict[str, Any] = data.get("providers", {})
    for name, entry in providers.items():
        if name in builtins:
            continue
        for needed in ("dialect", "base_url"):
            if needed not in entry:
                problems.append(
                    f"{_where(lines, ('providers', name))}: `{needed}` is required for a "
                    f"provider that is not built in ({', '.join(builtins)} are)"
                )
    known = set(builtins) | set(providers)
    problems += _model_problems(data.get("models", []), known, lines)
    for name, server in data.get("mcp_servers", {}).items():
        if ("command" in server) == ("url" in server):
            problems.append(
                f"{_where(lines, ('mcp_servers', name))}: an MCP server needs either `command` "
                "(the program that runs it) or `url` (where it listens); give exactly one"
            )
    for key in ("default_model", "compaction_model", "subagent_model"):
        provider = str(data.get(key, "")).split(":", 1)[0]
        if key in data and provider not in known:
            problems.append(f"{_where(lines, (key,))}: {_no_provider(provider, known)}")
    return problems


def _model_problems(models: list[Any], known: set[str], lines: dict[KeyPath, int]) -> list[str]:
    problems: list[str] = []
    values: set[str] = set()
    names: set[str] = set()
    for n, entry in enumerate(models):
        value, name = f"{entry['provider']}:{entry['id']}", entry.get("name")
        if entry["provider"] not in known:
            where = _where(lines, ("models", n, "provider"))
            problems.append(f"{where}: {_no_provider(entry['provider'], known)}")
        elif value in values:
            problems.append(f"{_where(lines, ('models', n, 'id'))}: {value} is listed twice")
        elif name in names:
            where = _where(lines, ("models", n, "name"))
            problems.append(f"{where}: another model is already called {name!r}")
        reserve, window = entry.get("reply_reserve"), entry.get("window")
        if reserve is not None and window is not None and reserve * 2 >= window:
            problems.append(
                f"{_where(lines, ('models', n, 'reply_reserve'))}: the reply reserve "
                f"({reserve:,}) must be less than half the window ({window:,}), so that most "
                "of it is left for the conversation"
            )
        values.add(value)
        if name:
            names.add(name)
    return problems


def _no_provider(name: str, known: set[str]) -> str:
    return (
        f"there is no provider {name!r}; use one of {', '.join(sorted(known))}, or add it "
        f"under [providers.{name}]"
    )


def _count(n: int) -> str:
    return "a problem" if n == 1 else f"{n} problems"


# ----- building ---------------------------------------------------------------------------------


def _build(
    data: dict[str, Any], builtins: dict[str, Provider], path: Path, stamp: tuple[int, int]
) -> Config:
    providers = dict(builtins)
    for name, entry in data.get("providers", {}).items():
        base = builtins.get(name)
        if base is not None and base.dialect == "local":
            base = None  # the embedded model has nothing to change: a file's `local` is its own
        providers[name] = Provider(
            name=name,
            dialect=entry.get("dialect") or (base.dialect if base else ""),
            base_url=(entry.get("base_url") or (base.base_url if base else "")).rstrip("/"),
            api_key_env=entry.get("api_key_env") or (base.api_key_env if base else None),
            headers=tuple(sorted(entry.get("headers", {}).items())),
            origin="built in, changed by the file" if base else "the file",
        )
    _remember_secrets(providers.values())
    # Imported for a file that is read: `initialize` (which reads no file) does without it.
    from acp_server.tools.mcp.config import from_file, remembered

    mcp_servers = tuple(remembered(server) for server in from_file(data.get("mcp_servers", {})))
    keys = tuple(sorted(data.get("keys", {}).items()))
    for variable, key in keys:
        redaction.remember_variable(variable)
        redaction.remember_secret(key)
    return Config(
        providers=tuple(providers.values()),
        models=tuple(_model(entry) for entry in data.get("models", [])),
        default_model=data.get("default_model"),
        default_mode=data.get("default_mode"),
        compaction_model=data.get("compaction_model"),
        subagent_model=data.get("subagent_model"),
        mcp_servers=mcp_servers,
        fetch=FetchSettings(**data.get("fetch", {})),
        sandbox=data.get("sandbox"),
        command_env=tuple(data.get("command_env", ())),
        mcp_tool_share=data.get("mcp_tool_share"),
        path=path,
        stamp=stamp,
        keys=keys,
    )


def _remember_secrets(providers: Iterable[Provider]) -> None:
    """Tell `redaction` every key variable and secret header the file configures, so those
    keys are hidden from what the agent shows and logs, and from the commands it runs, from the
    start (not only once a request carried them)."""
    for provider in providers:
        if provider.api_key_env:
            redaction.remember_variable(provider.api_key_env)
        redaction.remember_headers(provider.headers)


def _price(price: dict[str, Any]) -> Price:
    cached, written = price.get("cached_input"), price.get("cache_write")
    return Price(
        float(price["input"]),
        float(price["output"]),
        float(cached) if cached is not None else None,
        float(written) if written is not None else None,
    )


def _model(entry: dict[str, Any]) -> ModelConfig:
    price = entry.get("price")
    reasoning = entry.get("reasoning")
    return ModelConfig(
        provider=entry["provider"],
        id=entry["id"],
        name=entry.get("name"),
        window=entry.get("window"),
        reply_reserve=entry.get("reply_reserve"),
        price=_price(price) if price else None,
        tools=entry.get("tools"),
        images=entry.get("images"),
        reasoning=tuple(reasoning) if reasoning is not None else None,
        adaptive_thinking=entry.get("adaptive_thinking"),
        tool_call_ids=entry.get("tool_call_ids"),
        temperature=entry.get("temperature"),
        top_p=entry.get("top_p"),
    )
