"""Images for models that cannot read them: a short note in their place, and the server errors
that say a model refuses them.

A model's image input is known from the configuration (`images = false`), from Ollama's
`/api/show` capabilities (no "vision"), or learned the hard way: the server refuses a request
with an image. Servers word that refusal each their own way; `refuses_images` knows these
(each seen from the real server):

- OpenAI (and Azure), HTTP 400: "Invalid content type. image_url is only supported by certain
  models.";
- llama.cpp's server, HTTP 500: "image input is not supported - hint: if this is unexpected, you
  may need to provide the mmproj";
- Ollama, HTTP 500: "failed to process inputs: this model is missing data required for image
  input"; Ollama's cloud models and other gateways, HTTP 400: "this model does not support
  image input";
- LM Studio: "Model does not support images. Please use a model that does.";
- vLLM: "... is not a multimodal model"; OpenRouter, HTTP 404: "No endpoints found that support
  image input".

A refusal is final (never retried as a server error, even when it came as HTTP 500): the
backend remembers it and sends notes from then on, and the `StreamError` says so
(`images_refused`), so the session can mark the model text-only and ask again.
"""

from __future__ import annotations

import dataclasses
import logging
import re

from acp_server.messages import ContentPart, ImagePart, Message, ModelRequest, TextPart

log = logging.getLogger(__name__)

_REFUSALS = re.compile(
    r"image_url is only supported by certain models"
    r"|image input is not supported"
    r"|missing data required for image input"
    r"|do(?:es)? not support (?:image|images|vision)\b"
    r"|is not a multimodal model"
    r"|no endpoints found that support image input",
    re.IGNORECASE,
)


def refuses_images(detail: str) -> bool:
    """True when a server's error says the model does not take image input."""
    return bool(_REFUSALS.search(detail))


def note(part: ImagePart, why: str = "the current model cannot see images") -> TextPart:
    """What a model that cannot be given the image reads in its place."""
    return TextPart(f"[an image ({part.mime_type}) was here; {why}]")


# The OpenAI dialects' tool results are text: their images follow them in a user message.
TOOL_IMAGES_INTRO = "The images returned by the tool calls above:"


def attached_note(part: ImagePart) -> str:
    """What a text-only tool result says where its image was (it follows in a user message)."""
    return f"\n[image ({part.mime_type}): attached below]"


def has_images(request: ModelRequest) -> bool:
    return any(isinstance(p, ImagePart) for m in request.messages for p in m.content)


def images_as_notes(request: ModelRequest) -> ModelRequest:
    """`request` with every image replaced by a note (the request itself when it has none)."""
    if not has_images(request):
        return request
    messages = tuple(_noted(message) for message in request.messages)
    return dataclasses.replace(request, messages=messages)


def _noted(message: Message) -> Message:
    if not any(isinstance(part, ImagePart) for part in message.content):
        return message
    content: tuple[ContentPart, ...] = tuple(
        note(part) if isinstance(part, ImagePart) else part for part in message.content
    )
    return dataclasses.replace(message, content=content)


class ImageInput:
    """Whether a backend's model reads images: configured or discovered (`known`), or learned
    from the server refusing them. None: not known, images are sent."""

    def __init__(self, known: bool | None = None) -> None:
        self.known = known

    def fit(self, request: ModelRequest) -> ModelRequest:
        """The request as this model can take it: notes for images when it reads none."""
        return images_as_notes(request) if self.known is False else request

    def refused(self, label: str) -> None:
        """The server refused images: send notes from now on."""
        if self.known is not False:
            log.info("%s does not read images: sending a note in their place from now on", label)
        self.known = False
