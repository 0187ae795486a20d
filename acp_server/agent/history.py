"""The conversation a model sees, and the one way to change it: each change is recorded as made.

A session's history used to be a plain list changed in six places, each pairing its change with
its own call to the recorder; nothing made sure that what the model saw was what was stored.
`History` owns the messages. Reading it is a sequence's reading (index, iterate, `len`, slices
as new lists, `messages` as a tuple); changing it is `append`, `replace` (a compaction, a
carry-over to another model, `/clear`) or `cut` (a refused prompt), and each one is recorded in
the same call. No list is ever handed out, so a change made any other way cannot happen.

It lives with the agent loop, the lowest layer that changes it (the loop adds messages, the
context steps compact); the session owns the instance and gives it to each turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, overload

from acp_server.messages import Message, is_note


class Records(Protocol):
    """Where a history's changes are recorded (the session's `Recorder`)."""

    def message(self, message: Message) -> None: ...

    def history(self, messages: list[Message]) -> None: ...

    def truncate(self, length: int) -> None: ...


class Unrecorded:
    """Records nothing: a history kept only in memory (a turn run on its own, in a test)."""

    def message(self, message: Message) -> None: ...

    def history(self, messages: list[Message]) -> None: ...

    def truncate(self, length: int) -> None: ...


class History(Sequence[Message]):
    """A conversation's messages; every change goes through here and is recorded."""

    __slots__ = ("_messages", "_records")

    def __init__(self, messages: Iterable[Message] = (), records: Records | None = None) -> None:
        self._messages = list(messages)  # already recorded (a stored history, or a new one)
        self._records: Records = records or Unrecorded()

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._messages[index]  # a slice is a new list: changing it changes nothing here

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __eq__(self, other: object) -> bool:
        """The same messages (another history, or a list or tuple of them)."""
        if isinstance(other, History):
            return self._messages == other._messages
        if isinstance(other, list | tuple):
            return self._messages == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"History({self._messages!r})"

    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages now, as a request carries them."""
        return tuple(self._messages)

    def append(self, message: Message) -> None:
        """A new message at the end, recorded."""
        self._messages.append(message)
        self._records.message(message)

    def replace(self, messages: Sequence[Message]) -> None:
        """The whole history rebuilt (a compaction, a carry-over, `/clear`), recorded whole."""
        self._messages = list(messages)
        self._records.history(list(messages))

    def clear(self) -> None:
        """An empty history (`/clear`): the stored transcript keeps what was said."""
        self.replace([])

    def last_prompt_is(self, message: Message) -> bool:
        """`message` is the last, but for the agent's notes after it (`messages.is_note`)."""
        tail = next((m for m in reversed(self._messages) if not is_note(m)), None)
        return tail is message

    def cut(self, message: Message) -> bool:
        """Drop `message` (found by identity) and everything after it; False if it is gone
        already (a compaction may have rebuilt the history since)."""
        start = next((i for i, m in enumerate(self._messages) if m is message), None)
        if start is None:
            return False
        del self._messages[start:]
        self._records.truncate(start)
        return True
