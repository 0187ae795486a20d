"""Where a process's sessions get their models: the catalogue, the configuration file behind
it, a backend for each model, and the models discovered on local servers.

One `ModelSource` serves every session of the process (`registry.Sessions` asks it):

- `catalogue()`: every `--model` (repeatable; else ACP_SERVER_MODEL, comma-separated; the first is
  the default), the configuration file's models and what discovery found. The file is read at
  start and read again for a new session when it changed since (`configfile.changed_since`), so
  a fixed or edited file needs no restart;
- `problem`: why the configuration file or a model named at start cannot be used, in words for
  a person; while there is one, sessions answer every prompt with it (and say it after
  `session/new` where the editor shows notices) instead of the process failing or writing to
  stderr;
- `backend(entry)`: the backend of a model, one per model, shared by the sessions that use it;
- `discover()`: the local servers asked once, in the background after the first `session/new`
  (never delaying it); listeners hear about a catalogue that grew. ACP_SERVER_DISCOVER=0 turns
  discovery off;
- `learned_text_only(entry)`: a server refused images for this model; later sessions and
  switches send it notes in their place;
- `missing_key()`: the default model needs a key that is neither in the environment nor stored
  in the file (`acp-server login`): which variable, and what to do (for ACP's authentication);
  `unusable()`: why no model could answer a prompt now (for `authenticate`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server.backends import Backend
from acp_server.backends.providers import missing_provider_key
from acp_server.config.file import Config, ConfigError, ModelConfig, changed_since, load_config
from acp_server.errors import InternalError, InvalidParams
from acp_server.models.catalogue import Catalogue, ModelChoiceError, ModelEntry, build_catalogue
from acp_server.settings import FetchSettings

if TYPE_CHECKING:
    from acp_server.tools.mcp.config import ServerConfig

log = logging.getLogger(__name__)

DISCOVER_ENV = "ACP_SERVER_DISCOVER"
Listener = Callable[[Catalogue], None]


class ModelSource:
    """The models of this process (see the module docstring)."""

    def __init__(
        self,
        values: Sequence[str],
        env: Mapping[str, str],
        config_file: Path | None = None,
        *,
        must_exist: bool = False,
    ) -> None:
        self._values = list(values)
        self._env = dict(env)
        self._file = config_file
        self._must_exist = must_exist
        self._config: Config | None = None
        self._catalogue = Catalogue((), None)
        self.problem: str | None = None
        self._backends: dict[str, Backend] = {}
        self._text_only: set[str] = set()
        self._found: Catalogue | None = None  # the discovered part, merged into each reload
        self._discovery: asyncio.Task[None] | None = None
        self.listeners: list[Listener] = []
        self._load()

    # ----- the catalogue ------------------------------------------------------------------------

    def catalogue(self) -> Catalogue:
        """The catalogue for a new session: the file read again if it changed."""
        if self._config is None or changed_since(self._config):
            self._load()
        return self._catalogue

    @property
    def environ(self) -> dict[str, str]:
        """The environment, with the keys stored in the file for variables it does not set."""
        return self._config.environ(self._env) if self._config is not None else dict(self._env)

    def default_entry(self) -> ModelEntry | None:
        """The model new sessions start with (None: none is named, or it cannot be used)."""
        catalogue = self.catalogue()
        try:
            return catalogue.resolve(catalogue.default) if catalogue.default else None
        except InvalidParams:
            return None

    def missing_key(self) -> tuple[str, str] | None:
        """(variable, what to do) when the default model needs a key nobody gave; None when
        it needs none, has one, or there is no default (one is looked for at the first
        prompt) or the configuration cannot be used (that is another message)."""
        entry = self.default_entry()
        if self.problem is not None or entry is None or entry.provider.api_key_env is None:
            return None
        problem = missing_provider_key(entry.provider, entry.model, self.environ)
        return None if problem is None else (entry.provider.api_key_env, problem)

    async def unusable(self) -> str | None:
        """Why a new session's first prompt could not be answered now, for a person (None: a
        model is there). Without a model named, it is the one the server would find: a hosted
        API whose key is set, a local server that answers, the embedded model."""
        entry = self.default_entry()
        if self.problem is not None:
            return self.problem
        from acp_server.backends.local import backend as local

        if entry is not None:
            if entry.provider.dialect == "local":
                return local.missing(entry.model)
            return missing_provider_key(entry.provider, entry.model, self.environ)
        from acp_server.backends.selection.select import (
            hosted_default,
            how_to_configure,
            probe_local,
        )

        env = self.environ
        if hosted_default(env) is not None:
            return None
        if local.embedded_allowed(env) and local.missing("") is None:
            return None
        return None if await probe_local(env) is not None else how_to_configure(env)

    def forget_stored_keys(self) -> None:
        """Remove the keys stored in the configuration file (ACP's `logout`)."""
        if self._file is None:
            return
        from acp_server.config.keys import KeyFileError, remove_keys

        try:
            gone = remove_keys(self._file)
        except KeyFileError as exc:
            raise InternalError(f"Could not log out: {exc}") from exc
        log.info("logout: removed the stored key(s) %s", ", ".join(gone) or "(none stored)")

    @property
    def default_mode(self) -> str | None:
        return self._config.default_mode if self._config is not None else None

    @property
    def mcp_servers(self) -> tuple[ServerConfig, ...]:
        """The configuration file's MCP servers (read again with the catalogue)."""
        return self._config.mcp_servers if self._config is not None else ()

    @property
    def fetch(self) -> FetchSettings | None:
        """The configuration file's `[fetch]` table."""
        return self._config.fetch if self._config is not None else None

    @property
    def sandbox(self) -> str | None:
        """The configuration file's `sandbox` level."""
        return self._config.sandbox if self._config is not None else None

    @property
    def command_env(self) -> tuple[str, ...]:
        """The configuration file's `command_env`: variables commands may see."""
        return self._config.command_env if self._config is not None else ()

    @property
    def mcp_tool_share(self) -> float | None:
        """The file's `mcp_tool_share` (None: the default share)."""
        return self._config.mcp_tool_share if self._config is not None else None

    def _load(self) -> None:
        try:
            config = load_config(self._file, self._env, must_exist=self._must_exist)
            catalogue = build_catalogue(self._values, config)
        except (ConfigError, ModelChoiceError) as exc:
            self.problem = str(exc)
            # A stamp of the broken file, so that fixing it is noticed (None: look each time).
            self._config = None
            log.info("models cannot be used: %s", exc)
            return
        self.problem = None
        self._config = config
        self._catalogue = self._with_learned(self._merge_found(catalogue))
        self._backends.clear()  # providers may point elsewhere now

    def _merge_found(self, catalogue: Catalogue) -> Catalogue:
        found = self._found
        if found is None:
            return catalogue
        made = [p for name, p in found.providers.items() if name not in catalogue.providers]
        return catalogue.with_discovered(_configs(found.entries), made)

    def _with_learned(self, catalogue: Catalogue) -> Catalogue:
        entries = tuple(
            replace(e, images=False) if e.value in self._text_only else e for e in catalogue.entries
        )
        return replace(catalogue, entries=entries)

    # ----- backends -----------------------------------------------------------------------------

    def backend(self, entry: ModelEntry) -> Backend:
        """The backend of `entry` (made once per model and configuration). A model that lacks
        its key gets the backend that says so at once; any other is built at its first use,
        so that `session/new` does not wait for the HTTP stack to load (see deferred.py)."""
        backend = self._backends.get(entry.value)
        if backend is None:
            from acp_server.backends.deferred import Deferred
            from acp_server.backends.selection.select import from_provider

            env = self.environ
            problem = missing_provider_key(entry.provider, entry.model, env)

            def build() -> Backend:
                return from_provider(
                    entry.provider,
                    entry.model,
                    env,
                    window=entry.window,
                    images=False if entry.value in self._text_only else entry.images,
                    adaptive_thinking=entry.adaptive_thinking,
                    sampling=entry.sampling,
                )

            label = f"{entry.provider.dialect}:{entry.model}"
            backend = build() if problem is not None else Deferred(build, label)
            self._backends[entry.value] = backend
        return backend

    def learned_text_only(self, entry: ModelEntry) -> ModelEntry:
        """The server refused images for `entry`: it is text-only from now on."""
        self._text_only.add(entry.value)
        self._catalogue = self._with_learned(self._catalogue)
        return replace(entry, images=False)

    # ----- discovery ----------------------------------------------------------------------------

    def start_discovery(self) -> None:
        """Ask the local servers for their models, once, in the background."""
        if self._discovery is not None or self._env.get(DISCOVER_ENV, "1") in ("0", "off"):
            return
        self._discovery = asyncio.get_running_loop().create_task(self.discover())

    async def discover(self) -> None:
        from acp_server.backends.selection.discover import discover

        providers = list(self._catalogue.providers.values())
        found = await discover(providers)
        if not found.models:
            return
        grown = self._catalogue.with_discovered(found.models, found.providers)
        if len(grown.entries) == len(self._catalogue.entries):
            return
        known = {e.value for e in self._catalogue.entries}
        self._found = replace(
            grown, entries=tuple(e for e in grown.entries if e.value not in known)
        )
        self._catalogue = self._with_learned(grown)
        log.info("discovered %d model(s) on local servers", len(grown.entries) - len(known))
        for listener in list(self.listeners):
            listener(self._catalogue)

    async def aclose(self) -> None:
        if self._discovery is not None and not self._discovery.done():
            self._discovery.cancel()


def _configs(entries: Sequence[ModelEntry]) -> list[ModelConfig]:
    """Discovered entries as the model facts `with_discovered` takes again."""
    return [
        ModelConfig(
            e.provider.name,
            e.model,
            window=e.window,
            tools=e.tools,
            images=e.images,
            reasoning=e.levels,
        )
        for e in entries
    ]
