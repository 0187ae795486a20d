"""The model and thought level of a session: the part of `Session` that chooses them.

The `model` and `thought_level` config options beside `mode`, switching (the history is carried
over to the new model before the next prompt joins it, see carryover.py; a running turn
finishes with the model it started with), discovered models, and the announcements. `Session`
(session.py) inherits this class; it lives here so that each module holds one concept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from acp_server import updates
from acp_server.backends import Backend
from acp_server.editor_api import EditorApi
from acp_server.errors import InvalidParams
from acp_server.messages import Message
from acp_server.permissions import Mode
from acp_server.session import options
from acp_server.store.transcript import NullRecorder, Recorder

if TYPE_CHECKING:
    from acp_server.config.file import Price
    from acp_server.models.catalogue import ModelEntry
    from acp_server.session.choice import ModelChoice

SendUpdate = Callable[[str, updates.Update], None]


class ModelChoosing:
    """Model and thought-level choices; the attributes and methods below come from `Session`."""

    id: str
    history: list[Message]
    choice: ModelChoice | None  # None: one fixed backend (a script)
    _carry: ModelEntry | None  # the model the history is carried over to before the next prompt
    _recorder: Recorder | NullRecorder
    _send_update: SendUpdate
    _editor: EditorApi
    _queue: asyncio.Lock

    @property
    def mode(self) -> Mode:
        raise NotImplementedError

    def set_mode(self, mode: Mode) -> None:
        raise NotImplementedError

    def set_backend(self, backend: Backend) -> None:
        raise NotImplementedError

    def _model_options(self) -> list[dict[str, Any]]:
        return self.choice.options() if self.choice else []

    def config_options(self) -> list[dict[str, Any]]:
        """Every config option: mode, then model and thought level when there is a choice."""
        return options.config_options(self.mode, self._model_options())

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        """Set a config option (-32602 naming an unknown option or value); the whole list."""
        from acp_server.session.choice import LEVEL_KEY, MODEL_KEY

        if config_id == options.MODE_OPTION:
            self.set_mode(options.parse_mode(value, "value"))
        elif self.choice is not None and config_id in (MODEL_KEY, LEVEL_KEY):
            if config_id == MODEL_KEY:
                self.set_model(value)
            else:
                self.choice.choose_level(value)
                self._choice_changed()
        else:
            offered = ", ".join(o["id"] for o in self.config_options())
            raise InvalidParams(
                f"Invalid params: unknown `configId` {config_id!r}; this agent offers: {offered}.",
                {"field": "configId"},
            )
        return self.config_options()

    def set_model(self, value: object) -> None:
        """Switch the model: the history is carried over to it before the next prompt, which
        it answers (a running turn finishes with the model it started with)."""
        if self.choice is None:
            raise InvalidParams(
                "Invalid params: this session's model is fixed (a script answers it).",
                {"field": "modelId"},
            )
        entry = self.choice.choose_model(value)
        self.set_backend(self.choice.backend())
        self._carry = entry
        if not self._queue.locked():
            self._carry_over()
        self._choice_changed()

    def _summarizer(self) -> tuple[Backend, Price | None] | None:
        """The compaction model of the configuration file and its price (None: the session's
        model writes the summaries)."""
        found = self.choice.compaction() if self.choice is not None else None
        return (found[0], found[1].price) if found is not None else None

    def describe_choices(self, config_id: str) -> str:
        """A config option's choices in words, for /model and /mode."""
        from acp_server.session.choice import describe

        option = next((o for o in self.config_options() if o["id"] == config_id), None)
        if option is None:
            return "There is nothing to choose here: this session's model is fixed."
        return describe(option)

    def catalogue_grew(self) -> None:
        """Discovery found more models: announce them (a session without one adopts one)."""
        if self.choice is not None and self.choice.entry is not None:
            self.set_backend(self.choice.backend())
            self._carry = self.choice.entry
        self._choice_changed()

    def tell(self, text: str, severity: str = "warning") -> None:
        """A notice for the user outside a turn (dropped when the editor shows no notices)."""
        if self._editor.can_notice:
            self._send_update(
                self.id, {"sessionUpdate": "notice", "severity": severity, "title": text}
            )

    def _choice_changed(self) -> None:
        if self.choice is not None:
            self._recorder.choice(self.choice.stored())
        update = options.options_update(self.mode, self._model_options())
        self._send_update(self.id, update)

    def _carry_over(self) -> None:
        """Fit the history to the model chosen since the last prompt (see carryover.py), and
        record the result so the stored history stays the one the model sees."""
        if self._carry is None:
            return
        from acp_server.models.carryover import carry_over, differs

        carried, self._carry = carry_over(self.history, self._carry.target()), None
        if differs(self.history, carried):
            self.history[:] = carried
            self._recorder.history(carried)
