"""ACP authentication: always a way to set up a model, and a way to give a key that is missing.

`initialize` always lists "Set up a model" (id `setup`): the ACP registry admits only agents
that list at least one method of type `agent` or `terminal`, and a person needs a way to get
from "no model" to a working agent. When the default model needs a key nobody gave
(`ModelSource.missing_key()` names the variable), the method for that key comes first. Each
method is a `terminal` one for a client that declared `auth.terminal` (the schema allows it only
then), else an `agent` one:

- `terminal`: the editor runs our command again with the method's `args` appended, in a
  terminal: `setup` (`cli/setup.py`: pick a provider, store what it needs) or `login VARIABLE`
  (`cli/login.py`: ask for the key); both store into the configuration file, and the editor
  starts us again;
- `agent`: `authenticate` checks again (the file is read again when it changed, so a setup run
  meanwhile counts) and answers `auth_required` (-32000) saying what is still missing.

Listing a method never forces one: `session/new` answers `auth_required` only while the default
model lacks its key. A session whose model works needs no `authenticate` at all, and one that has
no model yet is told how to get one at its first prompt. `logout` removes the keys stored in
the file.
"""

from __future__ import annotations

from typing import Any

from acp_server.errors import AuthRequired, InvalidParams

SETUP_ID = "setup"
TERMINAL_ID = "login"
SETUP_NAME = "Set up a model"
SETUP_TEXT = (
    "Choose the model the agent uses: a hosted API with your key (kept in acp-server's "
    "configuration file, readable only by you), a model server on this machine, or the "
    "embedded model. Not needed when a model already works."
)


def methods(missing: tuple[str, str] | None, client_caps: dict[str, Any]) -> list[dict[str, Any]]:
    """The `authMethods` of `initialize`: the missing key's method (if one is), then setup."""
    auth = client_caps.get("auth")
    terminal = isinstance(auth, dict) and auth.get("terminal") is True
    found = [] if missing is None else [_key_method(missing[0], terminal)]
    return [*found, _setup_method(terminal)]


def _setup_method(terminal: bool) -> dict[str, Any]:
    if terminal:
        return {
            "type": "terminal",
            "id": SETUP_ID,
            "name": SETUP_NAME,
            "description": SETUP_TEXT,
            "args": ["setup"],
        }
    return {
        "id": SETUP_ID,
        "name": SETUP_NAME,
        "description": f"{SETUP_TEXT} Run `acp-server setup` in a terminal, then choose this "
        "to check again.",
    }


def _key_method(variable: str, terminal: bool) -> dict[str, Any]:
    if terminal:
        return {
            "type": "terminal",
            "id": TERMINAL_ID,
            "name": f"Enter {variable}",
            "description": f"The model needs an API key in {variable}. This asks for it in a "
            "terminal and keeps it in acp-server's configuration file, readable only by you.",
            "args": ["login", variable],
        }
    return {
        "id": f"env:{variable}",
        "name": f"Set {variable}",
        "description": f"The model needs an API key in {variable}: set it in the env of "
        f"this agent's configuration, or run `acp-server login {variable}` in a terminal, "
        "then start the agent again.",
    }


def required(missing: tuple[str, str]) -> AuthRequired:
    """The `auth_required` error for a missing key: what happened and what to do."""
    variable, problem = missing
    return AuthRequired(
        f"{problem} Or store the key with `acp-server login {variable}` in a terminal.",
        {"variable": variable},
    )


def not_ready(problem: str) -> AuthRequired:
    """The `auth_required` answer of `authenticate` while no model can answer yet."""
    return AuthRequired(
        f"No model can answer yet: {problem} `acp-server setup` in a terminal walks you "
        "through choosing one.",
        {"methodId": SETUP_ID},
    )


def check_method(method_id: str, advertised: list[dict[str, Any]]) -> None:
    """`authenticate` takes a method we listed. A terminal one is accepted too (a client must
    not send it, but checking again after the terminal run is what it would want); so is an id
    we never listed while no key is missing (clients that always authenticate with an id of
    their configuration kept working when we listed nothing, and must still)."""
    if any(m.get("id") == method_id for m in advertised):
        return
    if any(m.get("id") != SETUP_ID for m in advertised):
        listed = ", ".join(str(m["id"]) for m in advertised)
        raise InvalidParams(
            f"methodId {method_id!r} is not an authentication method this agent offered "
            f"(offered: {listed}).",
            {"methodId": method_id},
        )
