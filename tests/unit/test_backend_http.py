"""The shared HTTP layer of backends: error text, classification, Retry-After, retries, SSE."""

from __future__ import annotations

import asyncio
import email.utils
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from acp_server.backends._http import (
    MAX_DETAIL,
    BackendError,
    RetryPolicy,
    error_from_payload,
    error_from_response,
    lines,
    retry_after_seconds,
    retrying,
    send,
    translate,
)
from acp_server.backends._sse import SseEvent, SseParser, sse_events, sse_from_bytes
from acp_server.messages import Event, Finish, Notice, StreamError, TextDelta

URL = "http://llm.test/v1/chat/completions"
FAST = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.002, retry_after_cap=0.01)
HTML_502 = "<!DOCTYPE html><html><head><title>502</title></head><body><h1>nginx</h1></body></html>"


# ----- error text and classification -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": {"message": "model 'x' not found", "type": "invalid"}}, "model 'x' not found"),
        ({"error": "bad things"}, "bad things"),
        ({"message": "top-level words"}, "top-level words"),
        ({"detail": "fastapi words"}, "fastapi words"),
        ({"detail": [{"loc": ["body"], "msg": "field required"}]}, "field required"),
    ],
)
def test_the_envelope_message_is_what_people_read(body: Any, expected: str) -> None:
    failure = error_from_response(404, {}, json.dumps(body))
    assert failure.message == f"The model server answered HTTP 404 Not Found: {expected}"
    assert not failure.transient


def test_an_html_error_page_becomes_the_status_without_markup() -> None:
    failure = error_from_response(502, {"content-type": "text/html"}, HTML_502)
    assert failure.message == "The model server answered HTTP 502 Bad Gateway."
    assert "<" not in failure.message and failure.transient
    # Even without a content type saying so.
    assert "<" not in error_from_response(500, {}, HTML_502).message


def test_other_bodies_are_capped() -> None:
    failure = error_from_response(400, {}, "x" * 5000)
    assert len(failure.message) < MAX_DETAIL + 60
    assert failure.message.endswith("…")


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_names_the_variable_and_is_final(status: int) -> None:
    body = json.dumps({"error": {"message": "Incorrect API key provided"}})
    failure = error_from_response(status, {}, body, api_key_env="OPENAI_API_KEY")
    assert "Check the API key in the OPENAI_API_KEY environment variable" in failure.message
    assert "Incorrect API key provided" in failure.message
    assert not failure.transient
    assert "configuration" in error_from_response(status, {}, "").message


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000"),
        (400, "the request exceeds the available context size, try increasing it"),
        (413, "too many tokens in the prompt"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum"),
    ],
)
def test_a_context_overflow_says_so_and_is_not_retried(status: int, message: str) -> None:
    failure = error_from_response(status, {}, json.dumps({"error": {"message": message}}))
    assert failure.context_overflow and not failure.transient
    assert failure.message.startswith("The conversation is too long for the model's context")
    assert message in failure.message


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 529])
def test_transient_statuses(status: int) -> None:
    assert error_from_response(status, {}, "").transient


def test_overloaded_is_transient_whatever_the_status() -> None:
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}})
    assert error_from_response(400, {}, body).transient
    assert not error_from_response(400, {}, '{"error": {"message": "bad"}}').transient


def test_error_frames_inside_a_stream() -> None:
    assert error_from_payload({"choices": []}) is None
    failure = error_from_payload({"error": {"message": "upstream died", "code": 500}})
    assert failure is not None and failure.transient
    assert failure.message == "The model server reported an error: upstream died"
    overloaded = error_from_payload({"error": {"type": "overloaded_error", "message": "x"}})
    assert overloaded is not None and overloaded.transient
    final = error_from_payload({"error": {"message": "invalid tool schema"}})
    assert final is not None and not final.transient


def test_httpx_errors_are_translated_without_tracebacks() -> None:
    connect = translate(httpx.ConnectError("[Errno 111] Connection refused"), URL)
    assert connect.transient
    assert connect.message == (
        "Could not connect to the model server at http://llm.test: [Errno 111] Connection refused."
    )
    assert translate(httpx.ReadTimeout("timed out"), URL).transient
    assert translate(httpx.RemoteProtocolError("peer closed"), URL).transient
    assert not translate(httpx.UnsupportedProtocol("ftp?"), URL).transient
    assert "Traceback" not in connect.message


# ----- Retry-After and backoff ------------------------------------------------------------------


def test_retry_after_in_seconds_millis_and_http_date() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 20, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now) == pytest.approx(20)
    assert retry_after_seconds({"retry-after": date}, now=now + 100) == 0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_is_jittered_exponential_and_capped() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=30.0, retry_after_cap=60.0)
    for failures, full in [(1, 1.0), (2, 2.0), (3, 4.0), (9, 30.0)]:
        for _ in range(20):
            assert full / 2 <= policy.delay(failures) <= full
    assert policy.delay(1, retry_after=12) == 12
    assert policy.delay(1, retry_after=600) == 60


# ----- send + retrying --------------------------------------------------------------------------


class Replies:
    """A MockTransport handler answering queued responses (or raising queued exceptions)."""

    def __init__(self, *replies: httpx.Response | Exception | Callable[..., Any]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            result: httpx.Response = await reply(request)
            return result
        return reply


def attempt_with(
    client: httpx.AsyncClient, first_byte_timeout: float | None = None
) -> Callable[[], AsyncGenerator[Event, None]]:
    """An attempt that yields each body line as text."""

    async def attempt() -> AsyncGenerator[Event, None]:
        request = client.build_request("POST", URL, json={})
        response = await send(
            client, request, first_byte_timeout=first_byte_timeout, api_key_env="TEST_KEY"
        )
        try:
            async for line in lines(response):
                yield TextDelta(line)
        finally:
            await response.aclose()
        yield Finish("stop")

    return attempt


async def run(replies: Replies, policy: RetryPolicy = FAST, **kw: Any) -> list[Event]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(replies)) as client:
        return [event async for event in retrying(attempt_with(client, **kw), policy)]


async def test_a_429_is_announced_before_waiting_what_retry_after_says() -> None:
    replies = Replies(
        httpx.Response(429, headers={"retry-after": "3"}, json={"error": {"message": "slow"}}),
        httpx.Response(200, text="hello"),
    )
    log: list[object] = []

    async def sleep(seconds: float) -> None:
        log.append(seconds)

    async with httpx.AsyncClient(transport=httpx.MockTransport(replies)) as client:
        policy = RetryPolicy(attempts=4, base_delay=0.001)
        async for event in retrying(attempt_with(client), policy, sleep=sleep):
            log.append(event)
    assert log == [
        Notice(
            "The model server answered HTTP 429 (rate limited); retrying in 3 s (attempt 2 of 4)."
        ),
        3.0,
        TextDelta("hello"),
        Finish("stop"),
    ]


async def test_retry_after_is_capped() -> None:
    replies = Replies(
        httpx.Response(503, headers={"retry-after": "3600"}), httpx.Response(200, text="ok")
    )
    events = await run(replies)
    assert events[0] == Notice(
        "The model server answered HTTP 503 (Service Unavailable); retrying in 0.01 s "
        "(attempt 2 of 4)."
    )
    assert events[1:] == [TextDelta("ok"), Finish("stop")]


async def test_exhausted_retries_end_in_a_stream_error() -> None:
    replies = Replies(*[httpx.Response(502, text=HTML_502) for _ in range(4)])
    events = await run(replies)
    assert len(replies.requests) == 4
    assert [type(e) for e in events] == [Notice, Notice, Notice, StreamError]
    assert events[-1] == StreamError(
        "The model server answered HTTP 502 Bad Gateway (gave up after 4 attempts)."
    )


async def test_final_errors_are_not_retried() -> None:
    replies = Replies(httpx.Response(401, json={"error": {"message": "no such key"}}))
    events = await run(replies)
    assert len(replies.requests) == 1
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert "TEST_KEY" in events[0].message and "no such key" in events[0].message


async def test_connection_errors_are_retried() -> None:
    replies = Replies(httpx.ConnectError("refused"), httpx.Response(200, text="up"))
    events = await run(replies)
    assert isinstance(events[0], Notice)
    assert "could not be reached" in events[0].text
    assert events[1:] == [TextDelta("up"), Finish("stop")]


async def test_a_slow_first_byte_is_a_transient_timeout() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(1)
        return httpx.Response(200, text="late")

    replies = Replies(slow, httpx.Response(200, text="quick"))
    events = await run(replies, first_byte_timeout=0.02)
    assert isinstance(events[0], Notice)
    assert "did not start answering in time" in events[0].text
    assert events[1:] == [TextDelta("quick"), Finish("stop")]


async def test_a_failure_after_output_is_not_retried() -> None:
    async def attempt() -> AsyncGenerator[Event, None]:
        yield TextDelta("partial")
        raise BackendError("cut", transient=True)

    events = [event async for event in retrying(attempt, FAST)]
    assert events == [TextDelta("partial"), StreamError("cut")]


# ----- SSE --------------------------------------------------------------------------------------


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def test_sse_fields_multiline_data_comments_and_done() -> None:
    body = [
        ": keep-alive",
        "event: message_start",
        "id: 7",
        'data: {"a":',
        "data:1}",
        "",
        "retry: 100",
        "",
        "data: [DONE]",
    ]
    events = [event async for event in sse_events(_aiter(body))]
    assert events == [
        SseEvent('{"a":\n1}', "message_start", "7"),
        SseEvent("[DONE]", "message", "7"),
    ]
    assert events[1].done and not events[0].done


async def test_sse_from_bytes_split_anywhere() -> None:
    raw = 'data: {"t": "é"}\r\n\r\nevent: x\rdata: 2\r\r'.encode()
    pieces = [raw[i : i + 3] for i in range(0, len(raw), 3)]
    events = [event async for event in sse_from_bytes(_aiter(pieces))]
    assert events == [SseEvent('{"t": "é"}'), SseEvent("2", "x")]


def test_sse_parser_is_usable_line_by_line() -> None:
    parser = SseParser()
    assert parser.feed("data: one") is None
    assert parser.feed("") == SseEvent("one")
    assert parser.feed("") is None  # a blank line with nothing pending dispatches nothing
    assert parser.end() is None


# ----- secrets ----------------------------------------------------------------------------------


async def test_a_server_that_echoes_the_key_never_gets_it_shown() -> None:
    """The key the request carried is redacted from the error people read (and the body)."""
    key = "sk-echo-" + "7" * 24

    async def echo(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"]
        return httpx.Response(401, json={"error": {"message": f"Bad key: {sent}"}})

    async with httpx.AsyncClient(transport=httpx.MockTransport(Replies(echo))) as client:
        request = client.build_request("POST", URL, headers={"Authorization": f"Bearer {key}"})
        with pytest.raises(BackendError) as caught:
            await send(client, request, api_key_env="TEST_KEY")
    assert key not in caught.value.message and key not in caught.value.body
    assert "Bad key: Bearer [redacted]" in caught.value.message


def test_an_error_frame_with_a_key_is_redacted() -> None:
    failure = error_from_payload({"error": {"message": "denied for x-api-key: sk-ant-12345678"}})
    assert failure is not None
    assert failure.message == "The model server reported an error: denied for x-api-key: [redacted]"


def test_a_client_for_plain_http_servers_trusts_no_authority_rather_than_checking_nothing() -> None:
    import ssl

    from acp_server.backends._http import tls_verify

    local = tls_verify("http://127.0.0.1:8080/v1", "HTTP://localhost:11434")
    assert isinstance(local, ssl.SSLContext)
    # Strict, with no authority: an https address it might be sent to fails verification.
    assert local.verify_mode == ssl.CERT_REQUIRED and local.check_hostname
    assert local.cert_store_stats()["x509_ca"] == 0
    assert tls_verify("https://api.openai.com/v1") is True
    assert tls_verify("http://127.0.0.1:8080/v1", "https://gateway.example/v1") is True
    assert tls_verify() is True
