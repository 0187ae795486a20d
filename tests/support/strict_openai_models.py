"""What api.openai.com refuses for its reasoning models, with the 400 bodies it really sends.

The reasoning models (o1, o3, o4-mini, gpt-5 and later) refuse `max_tokens` (they take
`max_completion_tokens`) and any `temperature` or `top_p` but the default. The list of models is
the mock's own, written from OpenAI's documentation, so that the agent's catalogue is tested
against it rather than against itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REASONING = re.compile(r"^(o1|o3|o4-mini|gpt-5)(?!.*-chat)")


def is_reasoning(model: object) -> bool:
    return isinstance(model, str) and bool(REASONING.match(model))


def refusal(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The error body api.openai.com answers (HTTP 400) for this request, or None."""
    if not is_reasoning(body.get("model")):
        return None
    if "max_tokens" in body:
        return _error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return _error(
                f"Unsupported value: '{name}' does not support {body[name]} with this model. "
                "Only the default (1) value is supported.",
                name,
                "unsupported_value",
            )
    return None


def _error(message: str, param: str, code: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }
