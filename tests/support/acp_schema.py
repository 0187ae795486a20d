"""Strict validation of captured wire traffic against the official ACP v1 JSON schema.

The schema is never copied into this repository: it is read from `../shared/acp-schema/v1/`
beside the checkout, or else from the copy inside the npm package `@agentclientprotocol/sdk`
installed under tests/. Message shapes are matched through the schema's `x-method`/`x-side`
keys: a request the agent sends is checked against the client-side request type of its method,
an answer the agent gives against the agent-side response type of the method it answers.

Methods that exist only in the unstable schema (`schema.unstable.json` beside `schema.json`,
for example `session/fork`) have their answers checked against the unstable schema's response
type; everything the stable schema defines is checked against the stable schema only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = (
    REPO.parent / "shared" / "acp-schema" / "v1" / "schema.json",
    REPO
    / "tests"
    / "node_modules"
    / "@agentclientprotocol"
    / "sdk"
    / "schema"
    / "v1"
    / "schema.json",
)

_INT_RANGES = {
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "uint32": (0, 2**32 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
}


def _as_read(req_id: Any) -> Any:
    """A request id as the agent reads it: lone surrogates become U+FFFD at its wire
    (acp_server/wire/jsonline.py), so a request with id "\\ud800" is answered as "\\ufffd"."""
    return re.sub("[\ud800-\udfff]", "\ufffd", req_id) if isinstance(req_id, str) else req_id


def schema_path() -> Path | None:
    return next((p for p in CANDIDATES if p.is_file()), None)


def unstable_schema_path(stable: Path) -> Path | None:
    """The unstable schema shipped beside a stable `schema.json`, if there is one."""
    path = stable.with_name("schema.unstable.json")
    return path if path.is_file() else None


def _format_checker() -> FormatChecker:
    checker = FormatChecker()
    for name, (low, high) in _INT_RANGES.items():

        def check(value: object, low: int = low, high: int = high) -> bool:
            if not isinstance(value, int) or isinstance(value, bool):
                return True  # `type` is checked elsewhere; formats only constrain numbers
            return low <= value <= high

        checker.checks(name)(check)
    return checker


# Methods removed from ACP that clients still call and the agent still answers (with `{}`):
# `session/set_model` (JetBrains, agent-shell and avante send it).
REMOVED_METHODS = frozenset({"session/set_model"})


class WireValidator:
    """Checks agent frames; tracks client request ids to know what each answer answers."""

    def __init__(self, path: Path, unstable: Path | None = None) -> None:
        schema = json.loads(path.read_text(encoding="utf-8"))
        self.defs: dict[str, Any] = schema["$defs"]
        self.envelope = Draft202012Validator(
            {"$defs": self.defs, **schema["anyOf"][0]}, format_checker=_format_checker()
        )
        self.agent_requests: dict[str, str] = {}  # method -> type sent by the agent
        self.agent_answers: dict[str, str] = {}  # method -> type of the agent's answer
        self.agent_notifications: dict[str, str] = {}
        for name, spec in self.defs.items():
            method, side = spec.get("x-method"), spec.get("x-side")
            if not method:
                continue
            if side == "client" and name.endswith("Request"):
                self.agent_requests[method] = name
            elif side == "agent" and name.endswith("Response"):
                self.agent_answers[method] = name
            elif (side == "client" and name.endswith("Notification")) or side == "protocol":
                self.agent_notifications[method] = name
        self._checked: dict[str, list[str]] = {}  # agent request/notification line -> problems
        # Answers to methods only the unstable schema has (method -> its response type there).
        self.unstable_defs: dict[str, Any] = {}
        self.unstable_answers: dict[str, str] = {}
        unstable = unstable or unstable_schema_path(path)
        if unstable is not None:
            self.unstable_defs = json.loads(unstable.read_text(encoding="utf-8"))["$defs"]
            for name, spec in self.unstable_defs.items():
                method, side = spec.get("x-method"), spec.get("x-side")
                if (
                    method
                    and side == "agent"
                    and name.endswith("Response")
                    and method not in self.agent_answers
                ):
                    self.unstable_answers[method] = name

    @cache  # noqa: B019 - one validator per type for the life of the process
    def for_type(self, name: str, unstable: bool = False) -> Draft202012Validator:
        defs = self.unstable_defs if unstable else self.defs
        return Draft202012Validator(
            {"$ref": f"#/$defs/{name}", "$defs": defs}, format_checker=_format_checker()
        )

    def _errors(self, type_name: str, instance: Any, unstable: bool = False) -> list[str]:
        label = f"{type_name} (unstable schema)" if unstable else type_name
        return [
            f"{label} at /{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in self.for_type(type_name, unstable).iter_errors(instance)
        ]

    def check_traffic(self, traffic: Iterable[tuple[str, str]]) -> list[str]:
        """Problems with every agent line in (side, raw line) traffic; [] when all is valid."""
        problems: list[str] = []
        client_requests: dict[str, str] = {}
        for side, line in traffic:
            if side == "client":
                try:
                    frame = json.loads(line)
                except (ValueError, RecursionError):  # hostile client lines, in wire tests
                    continue
                if isinstance(frame, dict) and "method" in frame and "id" in frame:
                    client_requests[json.dumps(_as_read(frame["id"]))] = str(frame["method"])
                continue
            problems += [
                f"{p}\n    frame: {line[:300]}"
                for p in self.check_agent_line(line, client_requests)
            ]
        return problems

    def check_agent_line(self, line: str, client_requests: dict[str, str]) -> list[str]:
        try:
            frame = json.loads(line)
        except ValueError:
            return ["the agent wrote a line that is not JSON"]
        if not isinstance(frame, dict):
            return ["the agent wrote JSON that is not an object"]
        if "method" in frame:
            # Requests and notifications stand alone: the same line (a replayed update, say)
            # is checked once.
            known = self._checked.get(line)
            if known is None:
                known = self._checked[line] = self._check_frame(frame, client_requests)
            return list(known)
        return self._check_frame(frame, client_requests)

    def _check_frame(self, frame: dict[str, Any], client_requests: dict[str, str]) -> list[str]:
        found = [f"envelope: {e.message}" for e in self.envelope.iter_errors(frame)][:1]
        method = frame.get("method")
        if isinstance(method, str):
            table = self.agent_requests if "id" in frame else self.agent_notifications
            type_name = table.get(method)
            if type_name is None:
                return [*found, f"the agent sent {method!r}, which the schema does not define"]
            return found + self._errors(type_name, frame.get("params"))
        if "error" in frame:
            return found + self._errors("Error", frame["error"])
        answered = client_requests.get(json.dumps(frame.get("id")))
        if answered is None:
            return [*found, f"the agent answered id {frame.get('id')!r}, which no request had"]
        type_name = self.agent_answers.get(answered)
        if type_name is not None:
            return found + self._errors(type_name, frame.get("result"))
        type_name = self.unstable_answers.get(answered)
        if type_name is not None:
            return found + self._errors(type_name, frame.get("result"), unstable=True)
        if answered in REMOVED_METHODS:
            result = frame.get("result")
            return found if result == {} else [*found, f"{answered} answered {result!r}, not {{}}"]
        return [*found, f"the agent answered {answered!r} with a result; no type for it"]
