"""ACP content blocks: which ones a prompt may carry, how they become message parts, and the
updates that show the prompt again on `session/load`.

The shape of each block is checked against `schemas/acp/session_prompt.json` (ACP's
ContentBlock); `admit` then refuses the types that need a prompt capability the agent does
not advertise. Only prompts that pass both are stored and replayed.
"""

from __future__ import annotations

import uuid
from typing import Any

from acp_server.errors import InvalidParams
from acp_server.messages import ContentPart, ImagePart, Message, TextPart
from acp_server.updates import Update

_NEEDS = {
    "image": ("image", "an image", "describe it in words or attach the file as a link"),
    "audio": ("audio", "audio", "describe it in words or attach the file as a link"),
    "resource": ("embeddedContext", "an embedded resource", "attach it as a resource_link"),
}


def admit(blocks: list[dict[str, Any]], capabilities: dict[str, bool]) -> None:
    """Refuse (-32602) the first block whose type needs a prompt capability we do not offer."""
    for index, block in enumerate(blocks):
        need = _NEEDS.get(block["type"])
        if need is not None and not capabilities.get(need[0], False):
            capability, what, instead = need
            raise InvalidParams(
                f"Invalid params for session/prompt: `prompt[{index}]` is {what}, but this agent "
                f"does not accept {what.removeprefix('an ')} (promptCapabilities.{capability} "
                f"is false); {instead} instead.",
                {"field": f"prompt[{index}]", "capability": capability},
            )


def prompt_message(blocks: list[dict[str, Any]]) -> Message:
    """An admitted ACP prompt as a neutral user message."""
    parts: list[ContentPart] = []
    for block in blocks:
        kind = block["type"]
        if kind == "text":
            parts.append(TextPart(block["text"]))
        elif kind == "image":
            parts.append(ImagePart(block["data"], block["mimeType"], block.get("uri")))
        elif kind == "resource_link":
            parts.append(TextPart(f"[Referenced: {block['name']} <{block['uri']}>]"))
        elif kind == "resource":
            parts.append(TextPart(_embedded(block["resource"])))
        else:  # audio: never admitted while promptCapabilities.audio is false
            parts.append(TextPart("[An audio clip was attached; this agent cannot hear audio.]"))
    return Message(role="user", content=tuple(parts), message_id=f"user_{uuid.uuid4().hex}")


def _embedded(resource: dict[str, Any]) -> str:
    uri = resource["uri"]
    if isinstance(resource.get("text"), str):
        return f'<resource uri="{uri}">\n{resource["text"]}\n</resource>'
    mime = resource.get("mimeType") or "binary data"
    return f"[Attached {uri} ({mime}); its binary content is not shown.]"


def user_chunks(blocks: list[dict[str, Any]], message_id: str | None) -> list[Update]:
    """The prompt as the user_message_chunk updates that replay it."""
    out: list[Update] = []
    for block in blocks:
        update: Update = {"sessionUpdate": "user_message_chunk", "content": block}
        if message_id:
            update["messageId"] = message_id
        out.append(update)
    return out
