"""A session: its roots, its history, the running turn and the prompts queued behind it.

Prompts on one session are served in arrival order (an `asyncio.Lock` is FIFO). A cancel ends
the running turn and every prompt queued at that moment; each answers `cancelled`. The one
place that turns cancellation into a stop reason is `_serve_turn`. Updates of a turn are
dropped once that turn has ended, so nothing arrives after its answer.

When a `Recorder` is attached, every history message and every shown update is written to
the store as it happens, and a prompt is answered only after its writes are committed. If
they could not be, the user is told so in the chat and the answer says `notSaved`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import session_config, updates
from acp_server.backends import Backend
from acp_server.config import Settings
from acp_server.editor_api import EditorApi, NoEditor
from acp_server.messages import Message
from acp_server.permissions import Mode, Permissions, RuleStore
from acp_server.store import SaveFailed, iso
from acp_server.transcript import Recorder

if TYPE_CHECKING:
    from acp_server.agent import StopReason, ToolRunner, TurnFailure

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


class History(list[Message]):
    """The model-side history; each appended message is reported (to the durable store)."""

    def __init__(self, items: Iterable[Message] = (), on_append: Any = None) -> None:
        super().__init__(items)
        self.on_append: Callable[[Message], None] | None = on_append

    def append(self, message: Message) -> None:
        super().append(message)
        if self.on_append is not None:
            self.on_append(message)


@dataclass
class Session:
    id: str
    cwd: Path
    backend: Backend
    send_update: SendUpdate
    additional_dirs: tuple[Path, ...] = ()
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)
    client: EditorApi = field(default_factory=NoEditor)
    tools: ToolRunner | None = None
    permissions: Permissions | None = None
    history: History = field(default_factory=History)
    recorder: Recorder | None = None
    title: str | None = None
    _queue: asyncio.Lock = field(default_factory=asyncio.Lock)
    _epoch: int = 0
    _turn: asyncio.Task[PromptOutcome] | None = None
    _cancelled: asyncio.Task[PromptOutcome] | None = None

    def __post_init__(self) -> None:
        if self.permissions is None:
            self.permissions = Permissions(RuleStore(self.cwd))
        if self.recorder is not None:
            self.history.on_append = self.recorder.message

    def toolbox(self) -> ToolRunner:
        """The session's tools, made at the first turn (the loop and the tools are not
        needed to answer `session/new`, and importing them costs the editor ~20 ms)."""
        if self.tools is None:
            from acp_server.tools.registry import default_tools
            from acp_server.tools.toolbox import Toolbox

            assert self.permissions is not None
            self.tools = Toolbox(
                default_tools(),
                cwd=self.cwd,
                roots=self.roots,
                client=self.client,
                permissions=self.permissions,
            )
        return self.tools

    @property
    def mode(self) -> Mode:
        assert self.permissions is not None
        return self.permissions.mode

    def set_mode(self, mode: Mode) -> None:
        """Switch the permission mode and announce it both ways (legacy modes, config option)."""
        assert self.permissions is not None
        self.permissions.mode = mode
        if self.recorder is not None:
            self.recorder.store.update(self.id, mode=mode)
        for update in session_config.mode_updates(mode):
            self.send_update(self.id, update)

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

    def _begin(self, message: Message, shown: Iterable[updates.Update]) -> None:
        if self.recorder is not None:
            for update in shown:
                self.recorder.shown(update)
        self.history.append(message)
        if self.title is None:
            self.title = title_for(message)
            if self.recorder is not None:
                self.recorder.store.update(self.id, title=self.title)
            self.send_update(
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
        if self.recorder is None:
            return None
        self.recorder.turn_ended(stop)
        try:
            await self.recorder.store.flush(self.id)
        except SaveFailed as exc:
            log.error("turn of session %s not saved: %s", self.id, exc)
            text = NOT_SAVED.format(path=self.recorder.store.path)
            # Live only: it is about the store itself, which just failed to take this turn.
            chunk = updates.message_chunk("agent_message_chunk", text, f"msg_{uuid.uuid4().hex}")
            self.send_update(self.id, chunk)
            return text
        return None

    async def _context_window(self) -> int:
        """The smallest window known: configured, or reported by the server; else a default."""
        known = [w for w in (self.settings.context_window,) if w]
        try:
            # Not `asyncio.wait_for`: on Python 3.11 it swallows a cancel that arrives as the
            # lookup finishes, and the cancelled turn would then run to its end.
            async with asyncio.timeout(WINDOW_LOOKUP_SECONDS):
                found = await self.backend.context_window()
        except (TimeoutError, Exception):
            log.debug("context window lookup failed", exc_info=True)
            found = None
        if found:
            known.append(found)
        return min(known) if known else self.settings.default_context_window

    async def _serve_turn(self, message: Message) -> PromptOutcome:
        from acp_server.agent import Turn, TurnFailure, run_turn
        from acp_server.tools.base import CancelledByUser

        live = True

        def emit(update: updates.Update) -> None:
            if live:
                if self.recorder is not None:
                    self.recorder.shown(update)
                self.send_update(self.id, update)

        def tell(text: str, severity: str) -> None:
            if self.client.can_notice:
                emit({"sessionUpdate": "notice", "severity": severity, "title": text})
            else:
                emit(updates.message_chunk("agent_message_chunk", text + "\n\n", None))

        start = len(self.history) - 1
        window = await self._context_window()
        turn = Turn(
            backend=self.backend,
            history=self.history,
            emit=emit,
            max_requests=self.settings.max_turn_requests,
            tell=tell,
            system=system_prompt(self.cwd, self.additional_dirs),
            context_size=window,
        )
        turn.tools = self.toolbox()
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
            if self.recorder is not None:
                self.recorder.truncate(start)
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


def user_chunks(blocks: list[dict[str, Any]], message_id: str | None) -> list[updates.Update]:
    """The prompt as the user_message_chunk updates that replay it."""
    out: list[updates.Update] = []
    for block in blocks:
        update: updates.Update = {"sessionUpdate": "user_message_chunk", "content": block}
        if message_id:
            update["messageId"] = message_id
        out.append(update)
    return out
