"""A session: its roots, its history, the running turn and the prompts queued behind it.

Prompts on one session are served in arrival order (an `asyncio.Lock` is FIFO). A cancel ends
the running turn and every prompt queued at that moment; each answers `cancelled`. The one
place that turns cancellation into a stop reason is `_serve_turn`. Updates of a turn are
dropped once that turn has ended, so nothing arrives after its answer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_server import session_config, updates
from acp_server.agent import StopReason, ToolRunner, Turn, run_turn
from acp_server.backends import Backend
from acp_server.clientapi import ClientApi, NoClient
from acp_server.config import Settings
from acp_server.messages import Message
from acp_server.permissions import Mode, Permissions, RuleStore

log = logging.getLogger(__name__)

SendUpdate = Callable[[str, updates.Update], None]


@functools.cache
def _system_template() -> str:
    return (Path(__file__).parent / "prompts" / "system.md").read_text("utf-8")


def system_prompt(cwd: Path, extra: tuple[Path, ...]) -> str:
    """The packaged system prompt, filled in for this session's roots."""
    roots = f" (and also {', '.join(map(str, extra))})" if extra else ""
    return _system_template().format(cwd=cwd, extra_roots=roots)


@dataclass
class Session:
    id: str
    cwd: Path
    backend: Backend
    send_update: SendUpdate
    additional_dirs: tuple[Path, ...] = ()
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)
    client: ClientApi = field(default_factory=NoClient)
    tools: ToolRunner | None = None
    permissions: Permissions | None = None
    history: list[Message] = field(default_factory=list)
    _queue: asyncio.Lock = field(default_factory=asyncio.Lock)
    _epoch: int = 0
    _turn: asyncio.Task[StopReason] | None = None
    _cancelled: asyncio.Task[StopReason] | None = None

    def __post_init__(self) -> None:
        if self.permissions is None:
            self.permissions = Permissions(RuleStore(self.cwd))
        if self.tools is None:
            from acp_server.tools.registry import default_tools
            from acp_server.tools.toolbox import Toolbox

            self.tools = Toolbox(
                default_tools(),
                cwd=self.cwd,
                roots=self.roots,
                client=self.client,
                permissions=self.permissions,
            )

    @property
    def mode(self) -> Mode:
        assert self.permissions is not None
        return self.permissions.mode

    def set_mode(self, mode: Mode) -> None:
        """Switch the permission mode and announce it both ways (legacy modes, config option)."""
        assert self.permissions is not None
        self.permissions.mode = mode
        for update in session_config.mode_updates(mode):
            self.send_update(self.id, update)

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.cwd, *self.additional_dirs)

    @property
    def busy(self) -> bool:
        return self._turn is not None and not self._turn.done()

    async def prompt(self, message: Message) -> StopReason:
        """Queue a user message behind any running turn, run it, return the stop reason."""
        epoch = self._epoch
        async with self._queue:
            if epoch != self._epoch:
                return "cancelled"
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
            return "cancelled" if turn.cancelled() else turn.result()

    def cancel(self) -> None:
        """End the running turn and every prompt queued now (no-op when idle)."""
        self._epoch += 1
        # Once per turn: a second cancel must not interrupt the first one's cleanup
        # (releasing terminals, killing processes).
        if self._turn is not None and self._cancelled is not self._turn:
            self._cancelled = self._turn
            self._turn.cancel()

    async def _serve_turn(self, message: Message) -> StopReason:
        live = True

        def emit(update: updates.Update) -> None:
            if live:
                self.send_update(self.id, update)

        start = len(self.history)
        self.history.append(message)

        def tell(text: str, severity: str) -> None:
            if self.client.can_notice:
                emit({"sessionUpdate": "notice", "severity": severity, "title": text})
            else:
                emit(updates.message_chunk("agent_message_chunk", text + "\n\n", None))

        turn = Turn(
            backend=self.backend,
            history=self.history,
            emit=emit,
            max_requests=self.settings.max_turn_requests,
            tell=tell,
            system=system_prompt(self.cwd, self.additional_dirs),
        )
        if self.tools is not None:
            turn.tools = self.tools
        try:
            stop = await run_turn(turn)
        except asyncio.CancelledError:
            return "cancelled"
        except Exception:
            log.exception("turn failed in session %s", self.id)
            emit(
                updates.message_chunk(
                    "agent_message_chunk",
                    "Something went wrong inside the agent and this turn was stopped. "
                    "The session still works; the agent's log has the details.",
                    None,
                )
            )
            return "end_turn"
        finally:
            live = False
        if stop == "refusal":
            # The refused prompt and everything after it stay out of later requests.
            del self.history[start:]
        return stop
