"""A session's choices as ACP sees them: legacy `modes` and the `configOptions` list.

Both views show the same state and change together: a mode set through `session/set_mode` or
through `session/set_config_option` is announced with `current_mode_update` *and*
`config_option_update`, because clients read one or the other (avante only the former,
CodeCompanion only the latter).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp_server.errors import InvalidParams
from acp_server.modes import MODE_IDS, MODES, Mode, is_mode

MODE_OPTION = "mode"


Options = Sequence[dict[str, Any]]


def state(mode: Mode, extra: Options = ()) -> dict[str, Any]:
    """`modes` and `configOptions`, as the answers to session/new, load, resume and fork carry
    them; `extra` are the options after `mode` (the model and thought level)."""
    return {"modes": modes_state(mode), "configOptions": config_options(mode, extra)}


def modes_state(mode: Mode) -> dict[str, Any]:
    return {
        "currentModeId": mode,
        "availableModes": [{"id": i, "name": n, "description": d} for i, n, d in MODES],
    }


def config_options(mode: Mode, extra: Options = ()) -> list[dict[str, Any]]:
    """The whole list, always: Zed replaces its option state with each answer."""
    return [
        {
            "id": MODE_OPTION,
            "name": "Mode",
            "description": "How much the agent may do without asking.",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": [{"value": i, "name": n, "description": d} for i, n, d in MODES],
        },
        *extra,
    ]


def parse_mode(value: object, field: str) -> Mode:
    if not is_mode(value):
        choices = ", ".join(MODE_IDS)
        raise InvalidParams(
            f"Invalid params: `{field}` must be one of {choices}; got {value!r}.",
            {"field": field, "allowed": list(MODE_IDS)},
        )
    return value


def mode_updates(mode: Mode, extra: Options = ()) -> list[dict[str, Any]]:
    """The two updates that announce a mode change."""
    return [
        {"sessionUpdate": "current_mode_update", "currentModeId": mode},
        options_update(mode, extra),
    ]


def options_update(mode: Mode, extra: Options = ()) -> dict[str, Any]:
    """The `config_option_update` that announces the whole list after a change."""
    return {"sessionUpdate": "config_option_update", "configOptions": config_options(mode, extra)}


def describe(config_options: list[dict[str, Any]], config_id: str) -> str:
    """A config option's choices in words, for /model and /mode."""
    from acp_server.session.model import describe as in_words

    option = next((o for o in config_options if o["id"] == config_id), None)
    if option is None:
        return "There is nothing to choose here: this session's model is fixed."
    return in_words(option)
