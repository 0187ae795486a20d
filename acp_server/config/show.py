"""`render_effective`: the configuration in effect as TOML a person can read, secrets masked.

For `acp-server config`: it shows where every provider points, which environment variable holds
its key and whether that variable is set or the key stored in the file (never its value), the
models and defaults (with the window the model catalogue gives a model the file gives none),
the sandbox level and the [fetch] settings, each with the variable that overrides it when set.
Header values whose names suggest a secret, and passwords inside URLs, are masked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from acp_server.config.file import Config, ModelConfig, Provider
from acp_server.settings import FETCH_ENV, FETCH_PRIVATE_ENV, SANDBOX_ENV

STORED = "stored in this file's [keys] (by `acp-server login` or `setup`)"
DEFAULT_SANDBOX = "workspace-write"  # confine.sandbox.DEFAULT_LEVEL, which sits above config
FETCH_VARIABLES = {"enabled": FETCH_ENV, "allow_private": FETCH_PRIVATE_ENV}


def render_effective(config: Config, env: Mapping[str, str] | None = None) -> str:
    """The configuration in effect, as TOML a person can read and copy; no secret is shown:
    keys are named with whether they are set, sensitive header values are masked."""
    env = os.environ if env is None else env
    where = f"{config.path}" if config.stamp is not None else "none (built-in defaults)"
    out = [f"# The configuration in effect. File: {where}"]
    for key in ("default_model", "default_mode", "compaction_model", "subagent_model"):
        value = getattr(config, key)
        out.append(f"{key} = {_toml(value)}" if value else f"# {key}: not set")
    out += _sandbox_lines(config, env)
    for provider in config.providers:
        out += ["", f"[providers.{provider.name}]  # {provider.origin}"]
        out += [f"dialect = {_toml(provider.dialect)}", f"base_url = {_toml(_mask_url(provider))}"]
        if provider.api_key_env:
            stored = dict(config.keys).get(provider.api_key_env)
            state = "set" if env.get(provider.api_key_env) else "NOT SET"
            state = STORED if stored and state != "set" else state
            out.append(f"api_key_env = {_toml(provider.api_key_env)}  # {state}")
        if provider.headers:
            shown = ", ".join(
                f"{_toml(k)} = {_toml(_mask_header(k, v))}" for k, v in provider.headers
            )
            out.append(f"headers = {{ {shown} }}")
    bases = {p.name: p.base_url for p in config.providers}
    for model in config.models:
        out += ["", "[[models]]", *_model_lines(model)]
        if model.window is None:
            out += _catalogue_window(model, bases.get(model.provider, ""))
    return "\n".join(out + _fetch_lines(config, env)) + "\n"


def _sandbox_lines(config: Config, env: Mapping[str, str]) -> list[str]:
    """The file's `sandbox` level, and the variable that overrides it when set."""
    line = f"sandbox = {_toml(config.sandbox)}" if config.sandbox else "# sandbox: not set"
    if env.get(SANDBOX_ENV):
        return [f"{line}  # {SANDBOX_ENV}={env[SANDBOX_ENV]} overrides it"]
    return [line + ("" if config.sandbox else f" (the default, {DEFAULT_SANDBOX})")]


def _fetch_lines(config: Config, env: Mapping[str, str]) -> list[str]:
    """The file's [fetch] table (the web page tool), when it says anything."""
    said = [(k, getattr(config.fetch, k)) for k in ("enabled", "allow_private")]
    if all(value is None for _, value in said):
        return []
    out = ["", "[fetch]"]
    for key, value in said:
        if value is not None:
            variable = FETCH_VARIABLES[key]
            note = f"  # {variable}={env[variable]} overrides it" if env.get(variable) else ""
            out.append(f"{key} = {_toml(value)}{note}")
    return out


def _model_lines(model: ModelConfig) -> list[str]:
    out = [f"provider = {_toml(model.provider)}", f"id = {_toml(model.id)}"]
    keys = ("name", "window", "reply_reserve", "tools", "images", "adaptive_thinking")
    for key in (*keys, "temperature", "top_p"):
        value = getattr(model, key)
        if value is not None:
            out.append(f"{key} = {_toml(value)}")
    if model.reasoning is not None:
        out.append(f"reasoning = [{', '.join(_toml(level) for level in model.reasoning)}]")
    if model.tool_call_ids is not None:
        out.append(f"tool_call_ids = {_toml(model.tool_call_ids)}")
    if model.price is not None:
        out.append(f"price = {{ input = {model.price.input}, output = {model.price.output} }}")
    return out


def _catalogue_window(model: ModelConfig, base_url: str) -> list[str]:
    """A comment with the window the model catalogue gives a model the file gives none."""
    from acp_server.backends.catalog import lookup_at

    facts = lookup_at(model.id, base_url) if base_url else None
    if facts is None or facts.window is None:
        return []
    return [f"# window: {facts.window:,} tokens unless its server says, from {facts.source}"]


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _mask_header(name: str, value: str) -> str:
    sensitive = ("auth", "key", "token", "secret", "cookie", "password")
    return "****" if any(word in name.lower() for word in sensitive) else value


def _mask_url(provider: Provider) -> str:
    """The base URL with any password in it masked."""
    parts = urlsplit(provider.base_url)
    if parts.password is None:
        return provider.base_url
    netloc = parts.netloc.replace(f":{parts.password}@", ":****@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
