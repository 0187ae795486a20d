"""The model a session talks to: its backend, the choice behind it, and the carry-over it needs.

A session *has* a `SessionModel`. With a choice of models (a `ModelChoice`: the model and the
thought level, their config options, what the store keeps of them), switching takes the new
model's backend at once; a running turn finishes with the backend it started with, and the
history is carried over to the new model (see `models/carryover.py`) before the next prompt
joins it. Without a choice (a script) the backend is fixed.

`ModelChoice` is made by the registry for each session, from the process's `ModelSource` and
what the store kept (`{"model": value, "thought_level": level}` in the session's state), and
the session asks it for:

- `options()`: the `model` and `thought_level` config options (after `mode`);
- `choose_model(value)` / `choose_level(value)`: a new choice, or -32602 naming the value; the
  level the user chose is kept, and the one in effect is re-clamped to what the model supports;
- `compaction()`: the configuration file's `compaction_model` for the summaries, when usable;
- `backend()`: the chosen model's backend, wrapped so that a server refusing images marks the
  model text-only and the round is asked again, once, with notes in their place
  (`ImageRetry`);
- `stored()`: what to keep in the store so load and resume bring the choice back.

`describe(option)` words a config option for the `/model` and `/mode` commands.

`session/new` answers with the model options before the session machinery is loaded, so this
module imports no more than the choice needs (the history and prices are types only here).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from acp_server.backends import Backend, Preparable
from acp_server.errors import InvalidParams
from acp_server.models.catalogue import Catalogue, ModelEntry, model_options, parse_level
from acp_server.models.source import ModelSource
from acp_server.thought import clamp

if TYPE_CHECKING:
    from acp_server.agent.history import History
    from acp_server.config.file import Price
    from acp_server.messages import Event, ModelRequest

log = logging.getLogger(__name__)

MODEL_KEY = "model"  # keys of the session's stored state
LEVEL_KEY = "thought_level"


class ModelChoice:
    """One session's model and thought level (see the module docstring)."""

    def __init__(
        self,
        source: ModelSource,
        catalogue: Catalogue,
        entry: ModelEntry | None,
        chosen: str | None,
    ) -> None:
        self.source = source
        self.catalogue = catalogue
        self.entry = entry
        self.chosen_level = chosen  # what the user chose; `level` is what the model gets
        self._unusable: set[str] = set()  # compaction models found unusable (told once)

    @classmethod
    def start(cls, source: ModelSource, stored: Mapping[str, Any]) -> ModelChoice:
        """The choice of a new session (`stored` empty) or of a restored one."""
        catalogue = source.catalogue()
        entry = None
        for value in (stored.get(MODEL_KEY), catalogue.default):
            if isinstance(value, str):
                try:
                    entry = catalogue.resolve(value)
                    break
                except InvalidParams:
                    log.info("the stored model %r is not offered any more", value)
        level = stored.get(LEVEL_KEY)
        return cls(source, catalogue, entry, level if isinstance(level, str) else None)

    @property
    def level(self) -> str | None:
        """The thought level requests carry (None: the model offers none)."""
        if self.entry is None:
            return None
        return clamp(self.chosen_level, self.entry.levels, self.entry.dialect)

    def options(self) -> list[dict[str, Any]]:
        if self.entry is None:
            return []
        return model_options(self.catalogue, self.entry, self.level)

    def stored(self) -> dict[str, str | None]:
        return {MODEL_KEY: self.entry.value if self.entry else None, LEVEL_KEY: self.chosen_level}

    def choose_model(self, value: object) -> ModelEntry:
        self.entry = self.catalogue.resolve(value)
        return self.entry

    def choose_level(self, value: object) -> str:
        if self.entry is None:
            raise InvalidParams(
                "Invalid params: no model is chosen yet, so there is no thought level to set.",
                {"field": "value"},
            )
        self.chosen_level = parse_level(value, self.entry)
        return self.chosen_level

    def grow(self, catalogue: Catalogue) -> bool:
        """Take a catalogue that discovery made larger; True when there is more to offer. A
        session without a model adopts the first one found."""
        if len(catalogue.entries) <= len(self.catalogue.entries):
            return False
        self.catalogue = catalogue
        if self.entry is None:
            self.entry = catalogue.entries[0]
        return True

    def backend(self) -> Backend:
        if self.entry is None:
            raise RuntimeError("no model is chosen")
        return ImageRetry(self.source.backend(self.entry), self._images_refused)

    def compaction(self) -> tuple[Backend, ModelEntry] | None:
        """The model that writes compaction summaries when the configuration file names one
        (`compaction_model`); None when the session's own model writes them: none is named,
        it is the session's model, or it cannot be used (logged, with why)."""
        return self._helper(self.catalogue.compaction, "compaction_model")

    def subagent(self) -> tuple[Backend, ModelEntry] | None:
        """The model of the `task` tool's subagents when the configuration file names one
        (`subagent_model`); None when they use the session's model."""
        return self._helper(self.catalogue.subagent, "subagent_model")

    def _helper(self, value: str | None, key: str) -> tuple[Backend, ModelEntry] | None:
        """The model named by the configuration file's `key` for a helper job, if usable."""
        if value is None or self.entry is None or value == self.entry.value:
            return None
        from acp_server.backends.unconfigured import UnconfiguredBackend

        try:
            entry = self.catalogue.resolve(value, key)
            backend = self.source.backend(entry)
        except Exception as exc:
            problem = str(exc)
        else:
            if not isinstance(backend, UnconfiguredBackend):
                return backend, entry
            problem = backend.message
        if value not in self._unusable:  # once per session, not at every turn
            self._unusable.add(value)
            log.warning(
                "the %s %s cannot be used, the session's model does its work: %s",
                key,
                value,
                problem,
            )
        return None

    def _images_refused(self) -> None:
        if self.entry is not None:
            self.entry = self.source.learned_text_only(self.entry)
            self.catalogue = self.source.catalogue()


class ImageRetry:
    """A backend that, when the server refuses the images of a request, marks the model text-only
    and asks once more with a note in place of each image, telling the user."""

    def __init__(self, inner: Backend, refused: Callable[[], None]) -> None:
        self.inner = inner
        self._refused = refused

    @property
    def label(self) -> str:
        return self.inner.label

    async def context_window(self) -> int | None:
        return await self.inner.context_window()

    def prepare(self) -> None:
        if isinstance(self.inner, Preparable):
            self.inner.prepare()

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        # Imported here: the model options of a session/new answer need none of it.
        from acp_server.backends.images import has_images, images_as_notes
        from acp_server.messages import Notice, StreamError

        async for event in self.inner.stream(request):
            if isinstance(event, StreamError) and event.images_refused and has_images(request):
                self._refused()
                yield Notice(
                    "This model cannot read images, so each image was replaced by a short note "
                    "and the request was sent again.",
                    "info",
                )
                async for retried in self.inner.stream(images_as_notes(request)):
                    yield retried
                return
            yield event


def describe(option: Mapping[str, Any]) -> str:
    """A config option for a person: its choices, the current one marked, and how to pick."""
    values: list[Mapping[str, Any]] = []
    for item in option.get("options", []):
        values += item.get("options", [item]) if "group" in item else [item]
    current = option.get("currentValue")
    lines = [f"{option['name']}: {option.get('description', '')}".rstrip(), ""]
    for value in values:
        mark = " (current)" if value["value"] == current else ""
        lines.append(f"- `{value['value']}`: {value['name']}{mark}")
    lines += ["", f"Choose one with `/{option['id']} ID`."]
    return "\n".join(lines)


class SessionModel:
    """The backend answering the session, and the model and thought level it was chosen by."""

    def __init__(self, backend: Backend, choice: ModelChoice | None) -> None:
        self.backend = backend
        self.choice = choice  # None: one fixed backend (a script)
        # A stored history may have been made by another model: carried over before it is used.
        self._carry: ModelEntry | None = choice.entry if choice else None

    def options(self) -> list[dict[str, Any]]:
        """The `model` and `thought_level` config options (none for a fixed backend)."""
        return self.choice.options() if self.choice else []

    @property
    def level(self) -> str | None:
        return self.choice.level if self.choice else None

    @property
    def price(self) -> Price | None:
        return self.choice.entry.price if self.choice and self.choice.entry else None

    def stored(self) -> dict[str, str | None] | None:
        """What the store keeps of the choice (None: nothing to keep)."""
        return self.choice.stored() if self.choice else None

    def choose(self, config_id: str, value: object) -> None:
        """Set the `model` or the `thought_level` option (InvalidParams naming a bad value)."""
        if config_id == MODEL_KEY:
            self.switch(value)
        elif self.choice is not None:
            self.choice.choose_level(value)

    def switch(self, value: object) -> None:
        """Another model: its backend from now on, the history carried over to it."""
        if self.choice is None:
            raise InvalidParams(
                "Invalid params: this session's model is fixed (a script answers it).",
                {"field": "modelId"},
            )
        self._carry = self.choice.choose_model(value)
        self.backend = self.choice.backend()

    def grew(self, catalogue: Catalogue) -> bool:
        """Discovery found more models; True when the choice offers them now (a session that
        had none adopts one)."""
        if self.choice is None or not self.choice.grow(catalogue):
            return False
        if self.choice.entry is not None:
            self.backend = self.choice.backend()
            self._carry = self.choice.entry
        return True

    def summarizer(self) -> tuple[Backend, Price | None] | None:
        """The compaction model of the configuration file and its price (None: the session's
        model writes the summaries)."""
        found = self.choice.compaction() if self.choice is not None else None
        return (found[0], found[1].price) if found is not None else None

    def carry_over(self, history: History) -> None:
        """Fit the history to the model chosen since the last prompt (the history records it,
        so the stored history stays the one the model sees)."""
        if self._carry is None:
            return
        from acp_server.models.carryover import carry_over, differs

        carried, self._carry = carry_over(history, self._carry.target()), None
        if differs(history, carried):
            history.replace(carried)
