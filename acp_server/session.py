"""A session: its roots, its model, its history, the running turn and the prompts queued behind it.

A session is made by the registry (`registry.Sessions`) with everything it works with: the
model backend, the editor, the recorder, the permissions, the settings and where its updates
go. `set_backend` changes the model between turns and keeps the history: a turn already
running finishes with the backend it started with, and the next turn uses the new one.

Prompts on one session are served in arrival order (an `asyncio.Lock` is FIFO). A cancel ends
the running turn and every prompt queued at that moment; each answers `cancelled`. The one
place that turns cancellation into a stop reason is `_serve_turn`. Updates of a turn are
dropped once that turn has ended, so nothing arrives after its answer.

Every history message and every shown update goes to the recorder as it happens (a
`NullRecorder` when there is no store), and a prompt is answered only after its writes are
committed. If they could not be, the user is told so in the chat and the answer says
`notSaved`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import session_config, updates
from acp_server.backends import Backend
from acp_server.config import Settings
from acp_server.editor_api import EditorApi
from acp_server.errors import InvalidParams
from acp_server.messages import Message
from acp_server.permissions import Mode, Permissions
from acp_server.store import SaveFailed, iso
from acp_server.transcript import NullRecorder, Recorder

if TYPE_CHECKING:
    from acp_server.agent import StopReason, ToolRunner, TurnFailure
    from acp_server.choices import ModelChoice
    from acp_server.models import ModelEntry

log = logging.getLogger(__name__)

SendUpdate = Callable[[str, updates.Update], None]
TITLE_CHARS = 60
WINDOW_LOOKUP_SECONDS = 3.0


@functools.cache
def _system_template() -> str:
    return (Path(__file__).parent / "prompts" / "system.md").read_text("utf-8")


def system_prompt(cwd: Path, extra: tuple[Path, ...]) -> str:
    """The packaged system prompt, filled in for this session's roots."""
    roots = f" (and also {', '.join(map(str, extra))})" if extra else ""
    return _system_template().format(cwd=cwd, extra_roots=roots)


def title_for(message: Message) -> str:
    """A short, deterministic title: the first line of the first prompt, cut on a word."""
    text = " ".join(message.text.split())
    if len(text) <= TITLE_CHARS:
        return text or "Untitled"
    cut = text.rfind(" ", 0, TITLE_CHARS)
    return text[: cut if cut > TITLE_CHARS // 2 else TITLE_CHARS].rstrip() + "…"


@dataclass(frozen=True)
class PromptOutcome:
    """How a prompt ended: its stop reason, the failure if the turn failed, and the message the
    user was shown if its records could not be saved."""

    stop: StopReason
    failure: TurnFailure | None = None
    not_saved: str | None = None


class Session:
    """One conversation: created by the registry, prompted by the protocol."""

    def __init__(
        self,
        session_id: str,
        *,
        cwd: Path,
        backend: Backend,
        editor: EditorApi,
        recorder: Recorder | NullRecorder,
        permissions: Permissions,
        settings: Settings,
        send_update: SendUpdate,
        additional_dirs: tuple[Path, ...] = (),
        mcp_servers: Sequence[dict[str, Any]] = (),
        history: Iterable[Message] = (),
        title: str | None = None,
        choice: ModelChoice | None = None,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.additional_dirs = additional_dirs
        self.mcp_servers = list(mcp_servers)
        self.history: list[Message] = list(history)
        self.title = title
        self._backend = backend
        self._editor = editor
        self._recorder = recorder
        self._permissions = permissions
        self._settings = settings
        self._send_update = send_update
        self._tools: ToolRunner | None = None
        self._queue = asyncio.Lock()
        self._epoch = 0  # incremented by each cancel; queued prompts of an older epoch end
        self._turn: asyncio.Task[PromptOutcome] | None = None
        self._cancelled: asyncio.Task[PromptOutcome] | None = None
        self.choice = choice  # the model and thought level; None: one fixed backend
        # A history carried over to this model before the next prompt joins it (a stored
        # history may have been made by another model).
        self._carry: ModelEntry | None = choice.entry if choice else None

    @property
    def backend(self) -> Backend:
        return self._backend

    def set_backend(self, backend: Backend) -> None:
        """Answer with `backend` from the next turn on, with the same history. A running turn
        is not interrupted: it finishes with the backend it started with."""
        self._backend = backend

    def _toolbox(self) -> ToolRunner:
        """The session's tools, made at the first turn."""
        if self._tools is None:
            # Imported at the first turn: `session/new` does not need the tools (~20 ms).
            from acp_server.tools.registry import default_tools
            from acp_server.tools.toolbox import Toolbox

            self._tools = Toolbox(
                default_tools(),
                cwd=self.cwd,
                roots=self.roots,
                client=self._editor,
                permissions=self._permissions,
            )
        return self._tools

    @property
    def mode(self) -> Mode:
        return self._permissions.mode

    def state(self) -> dict[str, Any]:
        """The session's modes and config options, as ACP's answers carry them."""
        return session_config.state(self.mode, self._model_options())

    def set_mode(self, mode: Mode) -> None:
        """Switch the permission mode and announce it both ways (legacy modes, config option)."""
        self._permissions.mode = mode
        self._recorder.mode(mode)
        for update in session_config.mode_updates(mode, self._model_options()):
            self._send_update(self.id, update)

    # ----- the model and thought level (acp_server.choices) ----------------------------------

    def _model_options(self) -> list[dict[str, Any]]:
        return self.choice.options() if self.choice else []

    def config_options(self) -> list[dict[str, Any]]:
        """Every config option: mode, then model and thought level when there is a choice."""
        return session_config.config_options(self.mode, self._model_options())

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        """Set a config option (-32602 naming an unknown option or value); the whole list."""
        from acp_server.choices import LEVEL_KEY, MODEL_KEY

        if config_id == session_config.MODE_OPTION:
            self.set_mode(session_config.parse_mode(value, "value"))
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

    def describe_choices(self, config_id: str) -> str:
        """A config option's choices in words, for /model and /mode."""
        from acp_server.choices import describe

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
        update = session_config.options_update(self.mode, self._model_options())
        self._send_update(self.id, update)

    def _carry_over(self) -> None:
        """Fit the history to the model chosen since the last prompt (see carryover.py), and
        record the result so the stored history stays the one the model sees."""
        if self._carry is None:
            return
        from acp_server.carryover import carry_over

        carried, self._carry = carry_over(self.history, self._carry.target()), None
        if carried != self.history:
            self.history[:] = carried
            self._recorder.replace_history(carried)

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.cwd, *self.additional_dirs)

    async def prompt(self, message: Message, shown: Iterable[updates.Update] = ()) -> PromptOutcome:
        """Queue a user message behind any running turn, run it, say how it ended.
        `shown` are the user_message_chunk updates that replay the prompt on load."""
        epoch = self._epoch
        async with self._queue:
            if epoch != self._epoch:
                return PromptOutcome("cancelled")
            self._carry_over()
            self._begin(message, shown)
            turn = asyncio.create_task(self._serve_turn(message))
            self._turn = turn
            try:
                # `wait` (not `await turn`) so that a cancelled *turn* is told apart from a
                # cancelled *request*; only the latter propagates.
                await asyncio.wait({turn})
            except asyncio.CancelledError:
                turn.cancel()
                await asyncio.wait({turn})
                raise
            finally:
                self._turn = None
            outcome = PromptOutcome("cancelled") if turn.cancelled() else turn.result()
            return dataclasses.replace(outcome, not_saved=await self._end(outcome.stop))

    def cancel(self) -> None:
        """End the running turn and every prompt queued now (no-op when idle)."""
        self._epoch += 1
        # Once per turn: a second cancel must not interrupt the first one's cleanup
        # (releasing terminals, killing processes).
        if self._turn is not None and self._cancelled is not self._turn:
            self._cancelled = self._turn
            self._turn.cancel()

    def _add(self, message: Message) -> None:
        """The one place the session writes history: append the message, and record it."""
        self.history.append(message)
        self._recorder.message(message)

    def _begin(self, message: Message, shown: Iterable[updates.Update]) -> None:
        for update in shown:
            self._recorder.shown(update)
        self._add(message)
        if self.title is None:
            self.title = title_for(message)
            self._recorder.title(self.title)
            self._send_update(
                self.id,
                {
                    "sessionUpdate": "session_info_update",
                    "title": self.title,
                    "updatedAt": iso(time.time()),
                },
            )

    async def _end(self, stop: StopReason) -> str | None:
        """Record the end of the turn and wait for the turn's writes. None when all of them
        are committed; else the message that told the user the turn was not saved."""
        self._recorder.turn_ended(stop)
        try:
            await self._recorder.committed()
        except SaveFailed as exc:
            log.error("turn of session %s not saved: %s", self.id, exc)
            text = NOT_SAVED.format(path=self._recorder.where)
            # Live only: it is about the store itself, which just failed to take this turn.
            chunk = updates.message_chunk("agent_message_chunk", text, f"msg_{uuid.uuid4().hex}")
            self._send_update(self.id, chunk)
            return text
        return None

    async def _context_window(self, backend: Backend) -> int:
        """The smallest window known: configured, or reported by the server; else a default."""
        known = [w for w in (self._settings.context_window,) if w]
        try:
            # Not `asyncio.wait_for`: on Python 3.11 it swallows a cancel that arrives as the
            # lookup finishes, and the cancelled turn would then run to its end.
            async with asyncio.timeout(WINDOW_LOOKUP_SECONDS):
                found = await backend.context_window()
        except (TimeoutError, Exception):
            log.debug("context window lookup failed", exc_info=True)
            found = None
        if found:
            known.append(found)
        return min(known) if known else self._settings.default_context_window

    async def _serve_turn(self, message: Message) -> PromptOutcome:
        # Imported at the first turn: `session/new` does not need the loop (~10 ms).
        from acp_server.agent import Turn, TurnFailure, run_turn
        from acp_server.tools.base import CancelledByUser

        live = True

        def emit(update: updates.Update) -> None:
            if live:
                self._recorder.shown(update)
                self._send_update(self.id, update)

        def tell(text: str, severity: str) -> None:
            if self._editor.can_notice:
                emit({"sessionUpdate": "notice", "severity": severity, "title": text})
            else:
                emit(updates.message_chunk("agent_message_chunk", text + "\n\n", None))

        start = len(self.history) - 1
        backend = self._backend  # kept for the whole turn, whatever set_backend does meanwhile
        window = await self._context_window(backend)
        turn = Turn(
            backend=backend,
            history=self.history,
            emit=emit,
            record=self._recorder.message,
            max_requests=self._settings.max_turn_requests,
            tell=tell,
            system=system_prompt(self.cwd, self.additional_dirs),
            context_size=window,
            thought_level=self.choice.level if self.choice else None,
        )
        turn.tools = self._toolbox()
        try:
            stop = await run_turn(turn)
        except (asyncio.CancelledError, CancelledByUser):
            return PromptOutcome("cancelled")
        except Exception:
            log.exception("turn failed in session %s", self.id)
            emit(updates.message_chunk("agent_message_chunk", INTERNAL_FAILURE, None))
            return PromptOutcome("end_turn", TurnFailure("internal", INTERNAL_FAILURE))
        finally:
            live = False
        if stop == "refusal":
            # The refused prompt and everything after it stay out of later requests.
            del self.history[start:]
            self._recorder.truncate(start)
        return PromptOutcome(stop, turn.failure)


NOT_SAVED = (
    "This turn could not be saved to the session history ({path}), so it will be missing "
    "when this session is loaded again. The conversation itself can go on. Check that the "
    "disk is not full and that the file is writable; the agent's log has the details."
)
INTERNAL_FAILURE = (
    "Something went wrong inside the agent and this turn was stopped. "
    "The session still works; the agent's log has the details."
)
