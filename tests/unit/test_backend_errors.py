"""What a model server's error means for the retry policy (`backends._errors`): the errors
that waiting cannot cure (quota, allowance, billing) are shown at once with the server's words,
while a rate limit keeps its backoff and Retry-After."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from acp_server.backends._errors import error_from_payload, error_from_response
from acp_server.backends._http import RetryPolicy
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.messages import ModelRequest, Notice, StreamError, TextDelta, text_message

FAST = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.002, retry_after_cap=0.01)
ASK = ModelRequest(messages=(text_message("user", "hi"),))
# api.openai.com's answer when the account has no credit left.
INSUFFICIENT_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing "
        "details. For more information on this error, read the docs.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again "
        "in 20ms.",
        "type": "tokens",
        "code": "rate_limit_exceeded",
    }
}
MONTHLY = {"error": {"message": "You have reached your monthly allowance of requests."}}
BILLING_403 = {"error": {"message": "Billing is not active on this project.", "code": 403}}


@pytest.mark.parametrize(
    ("status", "body"),
    [(429, INSUFFICIENT_QUOTA), (429, MONTHLY), (403, BILLING_403), (402, MONTHLY)],
)
def test_a_spent_quota_is_final_and_says_what_the_server_said(status: int, body: Any) -> None:
    failure = error_from_response(status, {}, httpx.Response(status, json=body).text, "KEY_ENV")
    assert not failure.transient
    assert body["error"]["message"][:40] in failure.message
    assert "retrying would not help" in failure.message
    assert "KEY_ENV" not in failure.message  # it is not about the key


def test_a_rate_limit_stays_transient_with_its_wait() -> None:
    text = httpx.Response(429, json=RATE_LIMITED).text
    failure = error_from_response(429, {"retry-after": "2"}, text)
    assert failure.transient and failure.retry_after == 2.0


def test_a_quota_error_inside_a_stream_is_final() -> None:
    failure = error_from_payload({"error": {**INSUFFICIENT_QUOTA["error"], "code": 429}})
    assert failure is not None and not failure.transient
    limited = error_from_payload({"error": {"message": "slow down", "code": 429}})
    assert limited is not None and limited.transient


async def test_the_backend_asks_once_and_shows_the_quota_message_at_once() -> None:
    requests: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(429, json=INSUFFICIENT_QUOTA, headers={"retry-after": "1"})

    backend = OpenAIBackend(
        "http://llm.test/v1", "gpt-4.1", retry=FAST, transport=httpx.MockTransport(server)
    )
    try:
        events = [event async for event in backend.stream(ASK)]
    finally:
        await backend.aclose()
    assert len(requests) == 1
    assert not any(isinstance(e, Notice | TextDelta) for e in events)
    (failure,) = events
    assert isinstance(failure, StreamError)
    assert "You exceeded your current quota" in failure.message
