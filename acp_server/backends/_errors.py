"""What a model server's error means, for a person and for the retry policy.

`BackendError` is one failed attempt; `error_from_response` (a non-2xx answer) and
`error_from_payload` (an error envelope inside a 200 stream) classify what the server said:
transient or final, a context overflow (`overflow`), a model that refuses images (`images`),
with the envelope's message for a person (never an HTML page; other bodies capped). Used by
`_http`, which sends the requests and retries, and by the wire modules.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

import httpx

from acp_server import redaction
from acp_server.backends.images import refuses_images
from acp_server.backends.overflow import parse_overflow
from acp_server.messages import ContextOverflow

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504, 529})
# Words of a 429 (or 402/403) that waiting does not cure: the account's quota, allowance or
# billing, not the request rate. Retried, such a request fails the same way for a minute.
SPENT_WORDS = (
    "insufficient_quota",
    "exceeded your current quota",
    "billing",
    "allowance",
    "credit balance",
    "out of credits",
    "payment required",
    "spending limit",
    "per day",
    "daily limit",
    "monthly",
)
SPENT_STATUS = frozenset({402, 403, 429})
MAX_DETAIL = 500  # characters of an unrecognized error body shown to a person
SERVER = "The model server"


class BackendError(Exception):
    """One failed attempt to talk to a model server; `message` is for a person.

    Lives only inside backends: `retrying` turns it into a `StreamError` event, so it never
    reaches the agent loop or the wire. Its message and body are redacted here, where every
    backend error is made.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str = "failed",
        transient: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        body: str = "",
        context_overflow: ContextOverflow | None = None,
        images_refused: bool = False,
    ) -> None:
        message = redaction.redact(message)
        super().__init__(message)
        self.message = message
        self.reason = reason  # short, for the retry notice: "answered HTTP 429 (rate limited)"
        self.transient = transient
        self.status = status
        self.retry_after = retry_after
        # The raw error body (capped, redacted), for callers that look for a keyword.
        self.body = redaction.redact(body)
        # Set when the server said the request does not fit its window (see `overflow`).
        self.context_overflow = context_overflow
        # Set when the server said the model does not take image input (see `images`).
        self.images_refused = images_refused


def error_from_response(
    status: int, headers: Mapping[str, str], body: str, api_key_env: str | None = None
) -> BackendError:
    """The BackendError for a non-2xx answer: classified, with the best message for a person."""
    phrase = reason_phrase(status)
    payload = _loads(body)
    envelope = envelope_message(payload)
    detail = envelope or plain_detail(body, headers)
    retry_after = retry_after_seconds(headers)
    if status in SPENT_STATUS and spent(body):
        message = (
            f"{SERVER} refused the request (HTTP {status} {phrase}): the account's quota, "
            "allowance or billing limit is reached, so retrying would not help. "
            + (f"It said: {detail} " if detail else "")
            + "Check the plan and billing of the account the API key belongs to, or choose "
            "another model."
        )
        return BackendError(message, reason="quota reached", status=status, body=body)
    if status in (401, 403):
        where = f"the {api_key_env} environment variable" if api_key_env else "the configuration"
        message = f"{SERVER} refused the request (HTTP {status} {phrase}). Check the API key in "
        message += f"{where}." + (f" It said: {detail}" if detail else "")
        return BackendError(message, status=status, body=body)
    if refuses_images(detail or body[:MAX_DETAIL]):
        return BackendError(
            f"The model cannot read images; the server refused the request: {detail}",
            status=status,
            body=body,
            images_refused=True,
        )
    overflow = parse_overflow(detail, payload) if status in (400, 413, 422) else None
    if overflow is not None:
        return BackendError(
            f"The conversation is too long for the model's context window: {detail}",
            status=status,
            body=body,
            context_overflow=overflow,
        )
    overloaded = "overloaded" in body.lower()
    message = f"{SERVER} answered HTTP {status} {phrase}" + (f": {detail}" if detail else ".")
    return BackendError(
        message,
        reason=f"answered HTTP {status} ({'rate limited' if status == 429 else phrase})",
        transient=status in TRANSIENT_STATUS or overloaded,
        status=status,
        retry_after=retry_after,
        body=body,
    )


def spent(body: str) -> bool:
    """Whether an error body says the account's quota or billing, not the rate, is the limit."""
    text = body.lower()
    return any(word in text for word in SPENT_WORDS)


def error_from_payload(payload: Any) -> BackendError | None:
    """The BackendError for an error envelope that arrived inside a 200 stream, if it is one."""
    if not isinstance(payload, dict) or not payload.get("error"):
        return None
    detail = envelope_message(payload) or "no details given"
    error = payload["error"]
    kind = str(error.get("type", "")) if isinstance(error, dict) else ""
    code = error.get("code") if isinstance(error, dict) else None
    overloaded = "overloaded" in f"{kind} {detail}".lower()
    transient = (overloaded or code in TRANSIENT_STATUS) and not spent(f"{kind} {code} {detail}")
    overflow = parse_overflow(detail, payload)
    if overflow is not None:
        return BackendError(
            f"The conversation is too long for the model's context window: {detail}",
            context_overflow=overflow,
        )
    return BackendError(
        f"{SERVER} reported an error: {detail}",
        reason="is overloaded" if overloaded else "reported an error",
        transient=transient,
    )


def envelope_message(payload: Any) -> str | None:
    """`error.message`, `error` as a string, or a top-level `message`/`detail`, when present."""
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, dict) and error.get("message"):
        return _cap(str(error["message"]))
    if isinstance(error, str) and error:
        return _cap(error)
    for key in ("message", "detail"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return _cap(value)
        if isinstance(value, list) and value:  # FastAPI-style validation errors
            parts = [str(v.get("msg", v)) if isinstance(v, dict) else str(v) for v in value]
            return _cap("; ".join(parts))
    return None


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's requested wait: `retry-after-ms`, or `Retry-After` in seconds or HTTP-date."""
    millis = headers.get("retry-after-ms")
    if millis:
        with contextlib.suppress(ValueError):
            return max(float(millis) / 1000, 0.0)
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(float(value), 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def plain_detail(body: str, headers: Mapping[str, str]) -> str:
    """A non-envelope body as a detail: never an HTML page, capped."""
    text = body.strip()
    kind = headers.get("content-type", "").lower()
    if "html" in kind or text[:100].lower().startswith(("<!doctype", "<html", "<head", "<body")):
        return ""
    return _cap(text)


def _cap(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _loads(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def reason_phrase(status: int) -> str:
    return httpx.codes.get_reason_phrase(status) or ("Overloaded" if status == 529 else "Error")
