"""MCP results as the model reads them and as the editor shows them (ACP content)."""

from __future__ import annotations

import mcp.types as types

from acp_server.messages import ImagePart
from acp_server.tools.mcp.tools import kind_of, outcome, problems


def test_text_and_image_pass_through_and_the_model_gets_the_image() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="two things"),
            types.ImageContent(type="image", data="AA==", mime_type="image/png"),
        ]
    )
    out = outcome(result)
    assert out.ok and out.text == "two things"
    assert out.images == (ImagePart("AA==", "image/png"),)
    assert out.content == [
        {"type": "content", "content": {"type": "text", "text": "two things"}},
        {"type": "content", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}},
    ]


def test_a_structured_result_without_text_is_rendered_as_json() -> None:
    out = outcome(types.CallToolResult(content=[], structured_content={"sum": 5}))
    assert out.text == '{\n  "sum": 5\n}' and out.raw_output == {"sum": 5}
    assert out.content == [{"type": "content", "content": {"type": "text", "text": out.text}}]


def test_an_error_result_is_a_failed_call_the_model_reads() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="no such page")], is_error=True
    )
    out = outcome(result)
    assert not out.ok and out.text == "The tool reported an error: no such page"


def test_an_embedded_resource_keeps_its_shape_and_its_text_reaches_the_model() -> None:
    resource = types.TextResourceContents(uri="file:///a.txt", text="alpha", mime_type="text/plain")
    out = outcome(
        types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])
    )
    assert out.text == "alpha"
    assert out.content == [
        {
            "type": "content",
            "content": {
                "type": "resource",
                "resource": {"uri": "file:///a.txt", "text": "alpha", "mimeType": "text/plain"},
            },
        }
    ]


def test_kinds_come_from_the_annotations() -> None:
    assert kind_of(types.ToolAnnotations(read_only_hint=True)) == ("read", "read")
    assert kind_of(types.ToolAnnotations(destructive_hint=True)) == ("delete", "execute")
    assert kind_of(None) == ("other", "execute")


def test_arguments_are_checked_against_the_tools_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert problems(schema, {"n": 1}) == []
    assert problems(schema, {"n": "x"}) == ["n: 'x' is not of type 'integer'"]
    assert problems(schema, {}) == ["'n' is a required property"]
    assert problems({"type": "no-such-type"}, {}) == []  # the server's own schema is broken


def test_an_image_the_apis_cannot_read_is_a_note_and_an_image_alone_is_said() -> None:
    svg = types.ImageContent(type="image", data="PHN2Zy8+", mime_type="image/svg+xml")
    out = outcome(types.CallToolResult(content=[svg]))
    assert out.images == ()
    assert out.text == "[the tool returned an image (image/svg+xml); the user can see it]"
    png = types.ImageContent(type="image", data="AA==", mime_type="image/png")
    out = outcome(types.CallToolResult(content=[png]))
    assert out.text == "(the tool returned an image)" and len(out.images) == 1
