"""What the strict dialect checks share: name and image rules, base64 and JSON text tests."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def is_base64(text: Any) -> bool:
    if not isinstance(text, str) or not text:
        return False
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def is_object_text(text: Any) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def check_tools(tools: Any, problems: list[str], name_of: str) -> None:
    """Each offered tool has a valid name (`name_of`: where the name sits)."""
    if not isinstance(tools, list) or not tools:
        problems.append("tools: must be a non-empty list when present")
        return
    for n, tool in enumerate(tools):
        spec = tool.get("function") if name_of == "function" and isinstance(tool, dict) else tool
        if not isinstance(spec, dict) or not TOOL_NAME.fullmatch(str(spec.get("name", ""))):
            problems.append(f"tools.{n}: name must match ^[a-zA-Z0-9_-]{{1,64}}$")
