"""ACP authentication: asked for only when the default model needs a key nobody gave.

An editor that shows a login UI whenever `authMethods` is not empty (Zed, JetBrains) must not
show one for a model that needs no key, or whose key is set: so `initialize` lists a method only
when `ModelSource.missing_key()` names a variable, and then exactly one, naming it:

- `terminal` (only to a client that declared `auth.terminal`): the editor runs our command again
  with `login VARIABLE` appended, in a terminal; `acp-server login` asks for the key and stores it
  in the configuration file (`cli/login.py`), and the editor starts us again;
- otherwise an `agent` method: `authenticate` with it checks again (the file is read again when
  it changed, so a key stored meanwhile with `acp-server login` counts) and answers
  `auth_required` (-32000) with what to do while the key is still missing.

Until the key is there, `session/new` answers `auth_required` naming the variable. `logout`
removes the keys stored in the file.
"""

from __future__ import annotations

from typing import Any

from acp_server.errors import AuthRequired, InvalidParams

TERMINAL_ID = "login"


def methods(missing: tuple[str, str] | None, client_caps: dict[str, Any]) -> list[dict[str, Any]]:
    """The `authMethods` of `initialize`: none, or the one way to give the missing key."""
    if missing is None:
        return []
    variable = missing[0]
    auth = client_caps.get("auth")
    if isinstance(auth, dict) and auth.get("terminal") is True:
        return [
            {
                "type": "terminal",
                "id": TERMINAL_ID,
                "name": f"Enter {variable}",
                "description": f"The model needs an API key in {variable}. This asks for it "
                "in a terminal and keeps it in acp-server's configuration file, readable only "
                "by you.",
                "args": ["login", variable],
            }
        ]
    return [
        {
            "id": f"env:{variable}",
            "name": f"Set {variable}",
            "description": f"The model needs an API key in {variable}: set it in the env of "
            f"this agent's configuration, or run `acp-server login {variable}` in a terminal, "
            "then start the agent again.",
        }
    ]


def required(missing: tuple[str, str]) -> AuthRequired:
    """The `auth_required` error for a missing key: what happened and what to do."""
    variable, problem = missing
    return AuthRequired(
        f"{problem} Or store the key with `acp-server login {variable}` in a terminal.",
        {"variable": variable},
    )


def check_method(method_id: str, advertised: list[dict[str, Any]]) -> None:
    """`authenticate` takes only a method we listed, and never a terminal one."""
    chosen = next((m for m in advertised if m.get("id") == method_id), None)
    if chosen is None:
        listed = ", ".join(str(m["id"]) for m in advertised) or "none: no key is needed"
        raise InvalidParams(
            f"methodId {method_id!r} is not an authentication method this agent offered "
            f"(offered: {listed}).",
            {"methodId": method_id},
        )
    if chosen.get("type") == "terminal":
        raise InvalidParams(
            f"methodId {method_id!r} is a terminal method: run the agent with its `args` in a "
            "terminal instead of calling authenticate.",
            {"methodId": method_id},
        )
