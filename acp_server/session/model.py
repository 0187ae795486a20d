"""The model a session talks to: its backend, the choice behind it, and the carry-over it needs.

A session *has* a `SessionModel`. With a choice of models (`choice.ModelChoice`: the model and
the thought level, their config options, what the store keeps of them), switching takes the
new model's backend at once; a running turn finishes with the backend it started with, and the
history is carried over to the new model (see `models/carryover.py`) before the next prompt
joins it. Without a choice (a script) the backend is fixed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp_server.agent.history import History
from acp_server.backends import Backend
from acp_server.errors import InvalidParams

if TYPE_CHECKING:
    from acp_server.config.file import Price
    from acp_server.models.catalogue import Catalogue, ModelEntry
    from acp_server.session.choice import ModelChoice


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
        from acp_server.session.choice import MODEL_KEY

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
