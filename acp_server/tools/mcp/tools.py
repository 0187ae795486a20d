"""An MCP server's tools as the model's tools, and their results as ACP content.

Each tool is named `mcp__<server>__<tool>` (made safe and unique by `config.tool_name`),
carries the server's input schema (arguments are checked with jsonschema before the call) and
goes through the same permission gate and tool-call reporting as the built-in tools. Its kind
comes from the server's annotations: read-only tools are reads (they run without asking, like
reading a file); destructive ones are `delete` and others `other`, and both ask first.

Results: text, image, audio, embedded resources and resource links map to ACP content blocks
unchanged (the shapes match); the model reads the text, a structured result as JSON when the
server sent no text, and the images (PNG, JPEG, GIF, WebP) as images of the tool result
(`ToolOutcome.images`: each backend passes them on as its API allows, a note for a model that
reads none); for other content it reads a note.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp.types as types

from acp_server.messages import ImagePart
from acp_server.permissions import Effect, Permit
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolKind,
    ToolOutcome,
)
from acp_server.tools.base import text_content as text_content
from acp_server.tools.mcp.config import tool_name
from acp_server.tools.mcp.connection import McpConnection

log = logging.getLogger(__name__)

# The image formats the model APIs read; another (an SVG, say) is a note.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_ACP_FIELDS = {
    "text": ("text", "annotations", "_meta"),
    "image": ("data", "mimeType", "uri", "annotations", "_meta"),
    "audio": ("data", "mimeType", "annotations", "_meta"),
    "resource": ("resource", "annotations", "_meta"),
    "resource_link": (
        "uri",
        "name",
        "title",
        "description",
        "mimeType",
        "size",
        "annotations",
        "_meta",
    ),
}


def tools_of(connection: McpConnection, taken: set[str]) -> list[Tool]:
    """The server's tools, named so that no name in `taken` repeats (`taken` grows)."""
    tools = []
    for remote in connection.tools:
        name = tool_name(connection.name, remote.name, taken)
        taken.add(name)
        tools.append(_tool(connection, remote, name))
    return tools


def kind_of(annotations: types.ToolAnnotations | None) -> tuple[ToolKind, Effect]:
    if annotations is not None and annotations.read_only_hint:
        return "read", "read"
    if annotations is not None and annotations.destructive_hint:
        return "delete", "execute"
    return "other", "execute"


def _tool(connection: McpConnection, remote: types.Tool, name: str) -> Tool:
    schema: dict[str, Any] = dict(remote.input_schema or {}) or {"type": "object"}
    kind, effect = kind_of(remote.annotations)
    server = connection.name
    title = f"{remote.title or remote.name} ({server})"

    def present(arguments: dict[str, Any], ctx: ToolContext) -> Presentation:
        return Presentation(title)

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        found = problems(schema, arguments)
        if found:
            raise ToolFailure(f"Invalid arguments for {name}: " + "; ".join(found) + ".")
        shown = json.dumps(arguments, indent=2, ensure_ascii=False)
        preview = [text_content(f"MCP server {server!r}, tool {remote.name!r}:\n{shown}")]
        await ctx.permit(Permit(command=name if effect == "execute" else None, preview=preview))
        with connection.asker.calling(ctx) as call:  # its questions go to this call's editor
            return call.shown_with(outcome(await connection.call(remote.name, arguments)))

    description = (remote.description or remote.title or remote.name).strip()
    return Tool(
        name=name,
        description=f"{description}\n\n(From the MCP server {server!r}.)",
        kind=kind,
        effect=effect,
        present=present,
        run=run,
        input_schema=schema,
    )


def problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Every way the arguments break the tool's schema; [] when they fit (or the server's
    schema itself is not valid, in which case the server judges)."""
    from jsonschema import exceptions, validators

    try:
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
    except exceptions.SchemaError:
        log.warning("an MCP tool has an invalid input schema; its arguments are not checked")
        return []
    found = []
    for error in cls(schema).iter_errors(arguments):
        where = ".".join(str(p) for p in error.absolute_path)
        found.append(f"{where}: {error.message}" if where else error.message)
    return found


def outcome(result: types.CallToolResult) -> ToolOutcome:
    """The call's result for the model (text) and for the editor (ACP content)."""
    content = [_acp_block(block) for block in result.content]
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    images = tuple(
        ImagePart(b.data, b.mime_type)
        for b in result.content
        if isinstance(b, types.ImageContent) and b.mime_type in IMAGE_TYPES
    )
    notes = [
        _note(b)
        for b in result.content
        if not isinstance(b, types.TextContent) and not _is_image(b, images)
    ]
    structured = result.structured_content
    if structured is not None and not texts:
        texts.append(json.dumps(structured, indent=2, ensure_ascii=False))
        content.append(text_content(texts[-1]))
    shown = "(the tool returned an image)" if images else "(the tool returned nothing)"
    text = "\n".join([*texts, *notes]) or shown
    if result.is_error:
        text = f"The tool reported an error: {text}"
    return ToolOutcome(
        text,
        ok=not result.is_error,
        content=[c for c in content if c is not None] or None,
        raw_output=structured,
        images=images,
    )


def _is_image(block: Any, images: tuple[ImagePart, ...]) -> bool:
    return isinstance(block, types.ImageContent) and any(i.data == block.data for i in images)


def _acp_block(block: Any) -> dict[str, Any] | None:
    data = block.model_dump(by_alias=True, exclude_none=True, mode="json")
    fields = _ACP_FIELDS.get(data.get("type", ""))
    if fields is None:
        return None
    kept = {k: v for k, v in data.items() if k in fields}
    return {"type": "content", "content": {"type": data["type"], **kept}}


def _note(block: Any) -> str:
    kind = getattr(block, "type", "content")
    if kind == "resource_link":
        return f"[a link to {block.uri}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return text if isinstance(text, str) else f"[a resource: {resource.uri}]"
    mime = getattr(block, "mime_type", "")
    article = "an" if kind[:1] in ("a", "e", "i", "o", "u") else "a"
    return f"[the tool returned {article} {kind} ({mime}); the user can see it]"
