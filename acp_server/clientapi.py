"""What the agent may ask of the editor, as a seam the loop and the tools can depend on.

The protocol layer implements `ClientApi` over the JSON-RPC connection for one session; tests
implement it in memory. The capability flags say which optional methods the client advertised
(ACP forbids calling the others).
"""

from __future__ import annotations

from typing import Any, Protocol


class ClientApi(Protocol):
    @property
    def can_read(self) -> bool: ...

    @property
    def can_write(self) -> bool: ...

    @property
    def can_terminal(self) -> bool: ...

    @property
    def can_notice(self) -> bool:
        """The client shows `notice` updates (`session.notices` capability)."""
        ...

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Returns the `outcome` object: {"outcome": "selected", "optionId": …} or cancelled."""
        ...

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str: ...

    async def write_text_file(self, path: str, content: str) -> None: ...

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        """`env` holds ACP EnvVariable objects ({"name", "value"}) set for the command."""
        ...

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]: ...

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]: ...

    async def kill_terminal(self, terminal_id: str) -> None: ...

    async def release_terminal(self, terminal_id: str) -> None: ...


class NoClient:
    """A client that offers nothing and refuses every permission request."""

    can_read = False
    can_write = False
    can_terminal = False
    can_notice = False

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {"outcome": "cancelled"}

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        raise NotImplementedError

    async def write_text_file(self, path: str, content: str) -> None:
        raise NotImplementedError

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        raise NotImplementedError

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        raise NotImplementedError

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        raise NotImplementedError

    async def kill_terminal(self, terminal_id: str) -> None:
        raise NotImplementedError

    async def release_terminal(self, terminal_id: str) -> None:
        raise NotImplementedError
