"""The pieces of the seeded wire fuzz tests (tests/e2e/test_wire_fuzz.py and
test_load_fuzz.py): a hostile line and what must come back for it, JSON as a client writes it,
every path into a value and a copy with one node replaced, and the checks of the answers."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.raw import Frame, RawServer

BATCH = 64


@dataclass
class Case:
    """One line and what must come back: `answer` is answered exactly once; `maybe` at most once
    (a truncated line may or may not still show its id); anything else with null or nothing."""

    line: bytes
    answer: list[Any] = field(default_factory=list)
    maybe: list[Any] = field(default_factory=list)


def frame(req_id: Any, method: str, params: Any) -> dict[str, Any]:
    """A request (or, with `req_id` None, a notification) with the id first, as clients write."""
    out: dict[str, Any] = {"jsonrpc": "2.0"}
    if req_id is not None:
        out["id"] = req_id
    out["method"] = method
    if params is not ...:
        out["params"] = params
    return out


def dump(value: Any) -> bytes:
    # ensure_ascii writes lone surrogates as \ud800 escapes; allow_nan writes NaN as NaN.
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


DELETE = object()
ONE_OF_EACH_TYPE: list[Any] = [None, True, 7, 1.5, "s", [], {}, ["s"], {"s": 1}]
Path_ = list[str | int]


def field_paths(value: Any, path: Path_ | None = None) -> Iterator[Path_]:
    """Every path into `value` (the empty path is the value itself)."""
    path = path or []
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from field_paths(item, [*path, key])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from field_paths(item, [*path, i])


def replace(value: Any, path: Path_, new: Any) -> Any:
    """A copy of `value` with the node at `path` replaced by `new` (or removed: DELETE)."""
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if new is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return copy


async def send_all(server: RawServer, cases: list[Case]) -> None:
    for start in range(0, len(cases), BATCH):
        await server.send_raw(b"".join(c.line + b"\n" for c in cases[start : start + BATCH]))
        await asyncio.sleep(0)


async def answered(server: RawServer, ids: set[str], timeout: float | None) -> None:
    """Wait until every id in `ids` (as JSON text) has an answer."""
    async with asyncio.timeout(timeout):
        while ids - {json.dumps(f.get("id")) for f in server.seen if "method" not in f}:
            await asyncio.sleep(0.05)


def check_answers(seen: list[Frame], must: Counter[str], maybe: Counter[str], seed: int) -> None:
    """Each id that must be answered was answered once, each that may be at most as often as it
    was sent; apart from null and the test's own requests (ids below 10,000), nothing else."""
    answers = Counter(json.dumps(f.get("id")) for f in seen if "method" not in f)
    for key, count in answers.items():
        if key in must:
            assert count == must[key], f"seed {seed}: id {key} answered {count} times"
        elif key in maybe:
            assert count <= maybe[key], f"seed {seed}: id {key} answered {count} times"
        elif key != "null":
            own = key.isdigit() and int(key) < 10_000
            assert own and count == 1, f"seed {seed}: unexpected answer(s) with id {key}"
