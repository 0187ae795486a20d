"""Strict validation of captured wire traffic against the official ACP v1 JSON schema.

The schema is never copied into this repository: it is read from `../shared/acp-schema/` beside
the checkout (in CI the clone sits in a folder of its own with a copy of `shared/` beside it), and
a test that needs it fails, saying where it looked, when it is not there. Every agent frame is
checked against `v1-2026-11/schema.json`, the stable v1 schema with the features stabilized in
November 2026 (client system prompt, plan operations, subagent sessions). A frame that uses none
of those additions (`v1-2026-11/additions.json` names them) is also checked against the pinned
`v1/schema.json`, so what older clients read stays valid for them.

Message shapes are matched through the schema's `x-method`/`x-side` keys: a request the agent
sends is checked against the client-side request type of its method, an answer the agent gives
against the agent-side response type of the method it answers. Methods that exist only in the
unstable schema (`v1/schema.unstable.json`, for example `session/fork`) have their answers
checked against the unstable schema's response type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "acp-schema"
CURRENT = SHARED / "v1-2026-11" / "schema.json"
ADDITIONS = SHARED / "v1-2026-11" / "additions.json"
PINNED = SHARED / "v1" / "schema.json"
PINNED_UNSTABLE = SHARED / "v1" / "schema.unstable.json"


class SchemaMissing(AssertionError):
    """The official schema is not beside the checkout: the test cannot check anything."""


_INT_RANGES = {
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "uint32": (0, 2**32 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
}


def _required(path: Path) -> Path:
    if not path.is_file():
        raise SchemaMissing(
            f"the official ACP schema is missing: expected {path}. The tests read it from "
            "`shared/acp-schema/` in the folder that holds this checkout (see "
            "tests/support/acp_schema.py); put a copy of `shared/` there."
        )
    return path


def schema_path() -> Path:
    """The current stable schema (`v1-2026-11`); SchemaMissing when it is not there."""
    return _required(CURRENT)


def pinned_schema_path() -> Path:
    """The pinned v1 schema of the SDK release (`v1/schema.json`)."""
    return _required(PINNED)


def addition_markers(additions: Path) -> frozenset[tuple[str, str | None]]:
    """What marks a frame as using the November additions: (key, discriminator value) of each
    union variant added, and (property name, None) for each property patched in."""
    patch = json.loads(additions.read_text(encoding="utf-8"))
    markers: set[tuple[str, str | None]] = set()
    for variants in patch.get("x-oneOf-additions", {}).values():
        for variant in variants:
            for key, spec in variant.get("properties", {}).items():
                if isinstance(spec, dict) and isinstance(spec.get("const"), str):
                    markers.add((key, spec["const"]))
    for path in patch.get("x-property-patches", {}):
        markers.add((path.split()[0].split(".")[-1], None))
    return frozenset(markers)


def uses_additions(value: Any, markers: frozenset[tuple[str, str | None]]) -> bool:
    """Whether a frame (parsed JSON) holds a key or a discriminator the additions define."""
    if isinstance(value, list):
        return any(uses_additions(v, markers) for v in value)
    if not isinstance(value, dict):
        return False
    for key, item in value.items():
        if (key, None) in markers or (isinstance(item, str) and (key, item) in markers):
            return True
        if uses_additions(item, markers):
            return True
    return False


@cache
def official_validator() -> WireValidator:
    """The validator every wire test uses: the current schema, the pinned one where it applies
    and the pinned unstable one for unstable-only methods."""
    return WireValidator(
        schema_path(),
        unstable=_required(PINNED_UNSTABLE),
        pinned=WireValidator(pinned_schema_path()),
        markers=addition_markers(_required(ADDITIONS)),
    )


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

    def __init__(
        self,
        path: Path,
        unstable: Path | None = None,
        pinned: WireValidator | None = None,
        markers: frozenset[tuple[str, str | None]] = frozenset(),
    ) -> None:
        # `pinned` checks again each frame that uses none of `markers` (see the docstring).
        self.pinned = pinned
        self.markers = markers
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
                    client_requests[json.dumps(frame["id"])] = str(frame["method"])
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
        problems = self._check_line(line, frame, client_requests)
        if self.pinned is not None and not problems and not uses_additions(frame, self.markers):
            pinned = self.pinned.check_agent_line(line, client_requests)
            problems += [f"pinned v1 schema: {p}" for p in pinned]
        return problems

    def _check_line(
        self, line: str, frame: dict[str, Any], client_requests: dict[str, str]
    ) -> list[str]:
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
