"""A JSON-RPC 2.0 peer over newline-delimited JSON. Knows nothing about ACP.

One `Connection` reads lines from an async byte source and writes compact one-line frames to a
single sink. Every inbound request runs in its own task, so a notification (say, a cancel) is
handled while a long request is still running. Our own outgoing requests wait on futures keyed by
id; all of them fail with `ConnectionClosed` when the peer goes away.

Every line is decoded by `jsonline.decode`, which decides once, at the wire, what the rest of
the agent never has to handle: lone surrogates in any string (session ids, text, keys) are
replaced with U+FFFD, but a request's own id is kept exactly as sent, so that its answer
matches (`jsonline.encode` writes it back as the same escape); `NaN`/`Infinity` are a parse
error (-32700); nesting deeper than `jsonline.MAX_DEPTH` is an invalid request (-32600). A
request whose id can be read is answered with that id even when the rest of it is broken; null
is used only when no id can be read.

End of input (the client closed our stdin) stops reading, but every request already received
is finished and answered, prompts included; from then on our own requests to the client fail at
once, since no answer can arrive. Cancelling `serve` (a signal) stops everything immediately.

Errors reach the wire in exactly one place, `error_object`: handler exceptions from the error tree
keep their code and message; anything else becomes -32603 with a short message, and its
traceback goes to the log, never to the peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from acp_server.errors import (
    AcpError,
    ConnectionClosed,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    RemoteError,
    RequestCancelled,
)
from acp_server.wire import jsonline

log = logging.getLogger(__name__)

# Images and whole files travel inline, so long lines are normal; 64 MiB leaves room for 50 MiB.
DEFAULT_MAX_LINE = 64 * 1024 * 1024
CANCEL_REQUEST = jsonline.CANCEL_REQUEST

Params = dict[str, Any]
RequestHandler = Callable[[Params], Awaitable[Any]]
NotificationHandler = Callable[[Params], Awaitable[None] | None]
ReadChunk = Callable[[], Awaitable[bytes]]


GONE_CHECK = 0.25  # seconds: how often, after end of input, whether the client is gone


class Sink(Protocol):
    """Where frames go: one ordered byte sink (one with a `gone` attribute says when its
    reader has closed it)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


def error_object(exc: BaseException) -> dict[str, Any]:
    """The one mapping from an exception to a JSON-RPC error object."""
    if isinstance(exc, AcpError):
        err: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    if isinstance(exc, asyncio.CancelledError):
        return {"code": RequestCancelled.code, "message": "The request was cancelled."}
    return {
        "code": InternalError.code,
        "message": f"Internal error ({type(exc).__name__}); the agent's log has the details.",
    }


def _id_key(value: object) -> tuple[str, object]:
    return (type(value).__name__, value)


def _current() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None
    return task


class Connection:
    """One JSON-RPC peer: dispatches inbound messages and sends our own."""

    def __init__(
        self,
        read: ReadChunk,
        sink: Sink,
        *,
        requests: Mapping[str, RequestHandler],
        notifications: Mapping[str, NotificationHandler],
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self._read = read
        self._sink = sink
        self._requests = requests
        self._notifications = notifications
        self._max_line = max_line
        self._inflight: dict[tuple[str, object], asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._after: dict[asyncio.Task[Any], list[Callable[[], None]]] = {}
        self._next_id = 0
        self._input_closed = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    # ----- reading -------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read and dispatch until the input ends, finish what was received, then close."""
        try:
            async for line in jsonline.lines(self._read, self._max_line):
                self._dispatch(line)
            await self._finish_received()
        finally:
            await self.close()

    async def _finish_received(self) -> None:
        """At end of input, answer every request already received; ours can get no answer."""
        # Piping a few requests and closing stdin is how scripted tests drive a server:
        # cancelling at EOF answered the last of them with -32800.
        # A client that is gone (it closed its end of our output too: killed, or crashed) gets
        # nothing more from them: they end now, instead of running on unseen (a turn with a slow
        # local model ran tools for minutes after its editor was killed).
        self._input_closed = True
        self._fail_pending("the client closed its input, so it can no longer answer requests")
        while running := [t for t in (*self._inflight.values(), *self._background) if not t.done()]:
            await asyncio.wait(running, timeout=GONE_CHECK)
            if getattr(self._sink, "gone", False):
                log.info("the client is gone: the %d requests in progress end", len(running))
                return  # serve() closes: they are cancelled

    def _dispatch(self, line: bytes | jsonline.TooLong) -> None:
        if isinstance(line, jsonline.TooLong):
            self._answer_too_long(line.head)
            return
        if not line.strip():
            return
        try:
            msg = jsonline.decode(line)
        except AcpError as exc:
            self._send_error(jsonline.head_id(line), exc)
            return
        if not isinstance(msg, dict):
            kind = "a batch (array)" if isinstance(msg, list) else f"a {type(msg).__name__}"
            self._send_error(
                None,
                InvalidRequest(f"Invalid request: expected a JSON-RPC object, got {kind}."),
            )
            return
        problem = jsonline.envelope_problem(msg)
        if problem:
            # A request keeps its id when it has a usable one: answered with null instead, the
            # client would wait for that request for ever. A broken response is not a request.
            req_id = jsonline.readable_id(msg.get("id")) if "method" in msg else None
            self._send_error(req_id, InvalidRequest(f"Invalid request: {problem}."))
        elif "method" in msg:
            self._dispatch_call(msg)
        else:
            self._dispatch_response(msg)

    def _answer_too_long(self, head: bytes) -> None:
        req_id = jsonline.head_id(head)
        mib, rest = divmod(self._max_line, 1024 * 1024)
        limit = f"{mib} MiB" if mib and not rest else f"{self._max_line:,} bytes"
        self._send_error(
            req_id,
            InvalidRequest(
                f"Message too large: a line may hold at most {limit}; this one was longer and "
                "was dropped."
            ),
        )

    def _dispatch_call(self, msg: dict[str, Any]) -> None:
        method: str = msg["method"]
        params = msg.get("params")
        if "id" not in msg:
            self._notify_local(method, params)
            return
        req_id = msg["id"]
        key = _id_key(req_id)
        task = asyncio.create_task(self._serve_request(req_id, method, params))
        self._inflight[key] = task
        task.add_done_callback(functools.partial(self._forget, key))

    def _forget(self, key: tuple[str, object], task: asyncio.Task[None]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if task.cancelled():
            # Cancelled before its handler ever ran: it still gets its answer.
            self._send_error(key[1], asyncio.CancelledError())

    def _notify_local(self, method: str, params: Any) -> None:
        work = self._notification(method, params)
        if work is not None:
            # A task, like requests, so handlers start in arrival order: a cancel that follows
            # a request on the wire runs after that request has registered itself.
            task = asyncio.create_task(work)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _notification(self, method: str, params: Any) -> Coroutine[Any, Any, None] | None:
        """What a notification does: `$/cancel_request` is done at once (None), any other is
        its handler's work to run (None when it is ignored)."""
        if method == CANCEL_REQUEST:
            try:
                self._cancel_request(params)
            except InvalidParams as exc:
                log.debug("ignoring %s: %s", method, exc.message)
            return None
        handler = self._notifications.get(method)
        if handler is None:
            log.debug("ignoring unknown notification %s", method)
            return None
        if not isinstance(params, dict):
            log.warning("ignoring notification %s: params are not an object", method)
            return None
        return self._serve_notification(method, handler, params)

    def _cancel_request(self, params: Any) -> None:
        """Cancel the inbound request `$/cancel_request` names; InvalidParams if it names none."""
        target = params.get("requestId", ()) if isinstance(params, dict) else ()
        if not jsonline.valid_id(target):
            raise InvalidParams(
                f"Invalid params for {CANCEL_REQUEST}: `requestId` must be the id of a request "
                "(a string or an integer).",
                {"field": "requestId"},
            )
        task = self._inflight.get(_id_key(target))
        if task is not None:
            task.cancel()

    async def _notification_with_id(self, method: str, params: Any) -> None:
        """A sloppy peer sent a notification with an id: act on it (it is then answered), in
        this request's own task, which started in arrival order like every handler. (In a task
        of its own it started a step late: a request sent after a cancelling notification sent
        with an id was cancelled by it.)"""
        if method == CANCEL_REQUEST:
            self._cancel_request(params)
        elif method in self._notifications:
            work = self._notification(method, params)
            if work is not None:
                await work
        else:
            raise MethodNotFound(f"Method not found: {method!r}.")

    async def _serve_notification(
        self, method: str, handler: NotificationHandler, params: Params
    ) -> None:
        try:
            result = handler(params)
            if inspect.isawaitable(result):
                await result
        except AcpError as exc:  # e.g. invalid params: a notification has no answer to carry it
            log.warning("ignoring notification %s: %s", method, exc.message)
        except Exception:
            log.exception("notification handler %s failed", method)

    async def _serve_request(self, req_id: Any, method: str, params: Any) -> None:
        try:
            handler = self._requests.get(method)
            if handler is None:
                await self._notification_with_id(method, params)
                self._send_result(req_id, None)
                return
            if params is None:
                params = {}
            if not isinstance(params, dict):
                raise InvalidParams(f"Invalid params for {method!r}: params must be an object.")
            result = await handler(params)
        except asyncio.CancelledError as exc:
            self._send_error(req_id, exc)
        except AcpError as exc:
            self._send_error(req_id, exc)
        except Exception as exc:
            log.exception("handler for %s failed", method)
            self._send_error(req_id, exc)
        else:
            if self._send_result(req_id, result):
                await self._run_after_reply()
        finally:
            self._after.pop(_current(), None)

    def after_reply(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the result of the request being handled now (in this task) has
        been written to the sink, and only if it succeeds: work that must follow its answer."""
        task = _current()
        if task not in self._inflight.values():
            raise RuntimeError("after_reply is for a request handler of this connection")
        self._after.setdefault(task, []).append(callback)

    async def _run_after_reply(self) -> None:
        callbacks = self._after.pop(_current(), [])
        if not callbacks:
            return
        try:
            await self.drain()  # the sink has taken the answer: it leaves before what follows
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            return  # answered already (cancelled late, or closing): nothing must follow it
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("work after a reply failed")

    def _dispatch_response(self, msg: dict[str, Any]) -> None:
        req_id = msg.get("id")
        fut = self._pending.pop(req_id, None) if isinstance(req_id, int) else None
        if fut is None:
            if isinstance(req_id, int) and 0 < req_id <= self._next_id:
                # We stopped waiting (a cancelled turn, say); clients must still answer, so a
                # late answer is normal. Not a warning: some editors show stderr as errors.
                log.debug("dropping a late response to our request %r", req_id)
            else:
                log.warning("dropping a response to an unknown request id %r", req_id)
            return
        if fut.done():
            return
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            code = err["code"] if isinstance(err.get("code"), int) else InternalError.code
            fut.set_exception(RemoteError(code, str(err.get("message", "")), err.get("data")))
        else:
            fut.set_result(msg.get("result"))

    # ----- writing -------------------------------------------------------------------------

    def _write(self, frame: dict[str, Any]) -> None:
        if self._closed:
            return
        self._sink.write(jsonline.encode(frame))

    def _send_result(self, req_id: Any, result: Any) -> bool:
        try:
            self._write({"jsonrpc": "2.0", "id": req_id, "result": result})
        except (TypeError, ValueError) as exc:
            log.exception("result for request %r could not be encoded", req_id)
            self._send_error(req_id, exc)
            return False
        return True

    def _send_error(self, req_id: Any, exc: BaseException) -> None:
        self._write({"jsonrpc": "2.0", "id": req_id, "error": error_object(exc)})

    def notify(self, method: str, params: Params) -> None:
        """Send a notification; silently dropped once the connection is closed."""
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Params, *, withdraw: bool = False) -> Any:
        """Send a request to the peer and wait for its result (RemoteError on an error). With
        `withdraw`, a cancel of the caller while it waits tells the peer with
        `$/cancel_request` (a question on screen is taken down)."""
        if self._closed or self._input_closed:
            raise ConnectionClosed(
                f"cannot send {method}: the client closed the connection, so it cannot answer"
            )
        self._next_id += 1
        req_id = self._next_id
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        try:
            self._write({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
            return await fut
        except asyncio.CancelledError:
            if withdraw and (fut.cancelled() or not fut.done()):  # not answered meanwhile
                self.notify(CANCEL_REQUEST, {"requestId": req_id})
            raise
        finally:
            self._pending.pop(req_id, None)

    async def drain(self) -> None:
        """Wait until the sink has accepted what was written (backpressure)."""
        if not self._closed:
            await self._sink.drain()

    async def close(self, grace: float = 0.5) -> None:
        """Fail our pending requests, cancel running handlers, stop writing."""
        self._fail_pending("the client closed the connection")
        tasks = [*self._inflight.values(), *self._background]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        with contextlib.suppress(ConnectionError, OSError):
            await self._sink.drain()
        self._closed = True

    def _fail_pending(self, why: str) -> None:
        """Our requests still waiting for an answer fail now (`ConnectionClosed`)."""
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed(why))
        self._pending.clear()
