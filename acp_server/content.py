"""ACP content blocks as neutral message parts."""

from __future__ import annotations

import uuid
from typing import Any

from acp_server.messages import ContentPart, ImagePart, Message, TextPart


def prompt_message(blocks: list[dict[str, Any]]) -> Message:
    """An ACP prompt as a neutral user message."""
    parts: list[ContentPart] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(block["text"]))
        elif kind == "image":
            parts.append(ImagePart(block["data"], block["mimeType"], block.get("uri")))
        elif kind == "resource_link":
            parts.append(TextPart(f"[Referenced: {block['name']} <{block['uri']}>]"))
        elif kind == "resource":
            parts.append(TextPart(_embedded(block["resource"])))
        elif kind == "audio":
            parts.append(TextPart("[An audio clip was attached; this agent cannot hear audio.]"))
        else:
            parts.append(TextPart(f"[An attachment of unknown type {kind!r} was left out.]"))
    return Message(role="user", content=tuple(parts), message_id=f"user_{uuid.uuid4().hex}")


def _embedded(resource: dict[str, Any]) -> str:
    uri = resource["uri"]
    if isinstance(resource.get("text"), str):
        return f'<resource uri="{uri}">\n{resource["text"]}\n</resource>'
    mime = resource.get("mimeType") or "binary data"
    return f"[Attached {uri} ({mime}); its binary content is not shown.]"
