"""The shapes in which models write tool calls as text, and how one block of each is read.

Local models behind a server with no tool-call parser for them write their calls into the
reply text, each family its own way (tests/fixtures/local_replies holds real ones):

- `<tool_call>{"name": …, "arguments": …}</tool_call>`: Hermes, Qwen 2.5 and many fine-tunes;
- `<tools>…</tools>`: small Qwens, copying the tag their template lists the tools in;
- `<function=NAME>{…}</function>`: Llama 3.1's custom-tool format;
- `<|python_tag|>{"name": …, "parameters": …}`: Llama 3.1's built-in-tool format, to the end;
- `[TOOL_CALLS][{"name": …, "arguments": …}]` (or `[TOOL_CALLS]NAME[ARGS]{…}`): Mistral;
- a fenced code block (```` ```json ````) holding one call object, and a reply that is nothing but
  one call object: what Qwen2.5-Coder-1.5B writes most.

A model may also echo the markup its template wraps tool results in (`<tool_response>…`) instead
of answering: that is never shown either (`ECHO`).

The first five are markup: it only ever means a call, so it never shows, and a block that cannot
be read is a problem (the caller asks the model once more). The last two are ordinary text
that may happen to be a call: they are one only when every object in them names a tool that was
offered and its arguments fit that tool's schema; anything else stays text (`shaped` says
whether it still looked like a call, for the notice that nothing ran). A block that is not
JSON only because its strings are Python's triple-quoted ones (how Qwen2.5-Coder writes a
file's content) is read as the JSON it means (`loads`), and an optional argument given as ""
where the schema wants a non-empty string is left out (small models fill every parameter).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acp_server.schemas import without_empty_options

# name -> the tool's JSON Schema for its arguments: the tools the request offered
Offered = Mapping[str, Mapping[str, Any]]
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Form:
    name: str
    opener: str
    closer: str | None  # None: the block runs to the end of the reply
    markup: bool  # it only ever means a call: never shown, even when it cannot be read


FENCE = Form("fence", "```", "```", markup=False)
# The markup a template wraps tool results in (Qwen's), which small models echo as their answer.
ECHO = Form("tool_response", "<tool_response>", "</tool_response>", markup=True)
FORMS = (
    Form("tool_call", "<tool_call>", "</tool_call>", markup=True),
    Form("tools", "<tools>", "</tools>", markup=True),
    Form("function", "<function=", "</function>", markup=True),
    Form("python_tag", "<|python_tag|>", None, markup=True),
    Form("mistral", "[TOOL_CALLS]", None, markup=True),
    FENCE,
    ECHO,
)
# The info strings of a fenced block that may hold a call; any other block is shown as it comes.
CALL_FENCES = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code", "tools"})
END_TOKENS = ("<|eom_id|>", "<|eot_id|>", "</s>")  # left in by servers that do not strip them


@dataclass
class Reading:
    """What one block held: the calls to run, what was wrong, whether it looked like a call."""

    calls: list[Call] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    shaped: bool = False


def read_block(form: Form | None, content: str, offered: Offered) -> Reading:
    """Read one block of `form` (None: a whole reply that may be one bare call object)."""
    if form is FENCE:
        info, _, content = content.partition("\n")
        if info.strip().lower() not in CALL_FENCES:
            return Reading()
    text = content.strip()
    for token in END_TOKENS:
        text = text.removesuffix(token).rstrip()
    if form is not None and form.name == "function":
        name, _, arguments = text.partition(">")
        return _checked([{"name": name, "arguments": arguments.strip() or "{}"}], offered)
    if form is not None and form.name == "mistral" and "[ARGS]" in text.split("{", 1)[0]:
        name, _, arguments = text.partition("[ARGS]")
        return _checked([{"name": name, "arguments": arguments.strip() or "{}"}], offered)
    try:
        value = loads(text)
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return Reading(problems=[f"the block is not valid JSON: {reason}"])
    return _checked(value if isinstance(value, list) else [value], offered)


_TRIPLE = re.compile(r'"""(.*?)"""', re.DOTALL)


def loads(text: str) -> Any:
    """JSON, or JSON whose strings a model wrote as Python's triple-quoted ones (Qwen2.5-Coder
    does, for a file's content): those are read as the strings they spell, and only when the
    text is not valid JSON as it is."""
    try:
        return json.loads(text)
    except ValueError:
        if '"""' not in text:
            raise
    return json.loads(_TRIPLE.sub(lambda m: json.dumps(m.group(1)), text))


def _checked(items: list[Any], offered: Offered) -> Reading:
    out = Reading(shaped=bool(items) and all(_shaped(item) for item in items))
    for item in items:
        call = _call(item)
        if isinstance(call, str):
            out.problems.append(call)
            continue
        name, arguments = call[0], without_empty_options(call[1], offered.get(call[0]))
        problem = _unfit(name, arguments, offered)
        if problem is None:
            out.calls.append((name, arguments))
        else:
            out.problems.append(problem)
    return out


def _shaped(item: Any) -> bool:
    """An object with a name and arguments: what a call looks like, whether or not it is one."""
    if isinstance(item, dict) and isinstance(item.get("function"), dict):
        item = item["function"]
    if not isinstance(item, dict) or "name" not in item:
        return False
    return "arguments" in item or "parameters" in item


def parse_block(content: str) -> tuple[list[Call], list[str]]:
    """The calls in one block's content (an object or a list of them, maybe fenced), and what
    was wrong, whatever the names and arguments (`read_block` checks those)."""
    text = _strip_fence(content.strip())
    try:
        value = loads(text)
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return [], [f"the block is not valid JSON: {reason}"]
    calls: list[Call] = []
    problems: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        call = _call(item)
        if isinstance(call, str):
            problems.append(call)
        else:
            calls.append(call)
    return calls, problems


def _call(item: Any) -> Call | str:
    """(name, arguments), or what is wrong with the item."""
    if isinstance(item, dict) and isinstance(item.get("function"), dict):
        item = item["function"]  # the OpenAI shape, {"type": "function", "function": {…}}
    if not isinstance(item, dict):
        return "the block is not a JSON object"
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return 'the block has no "name"'
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f'the "arguments" of {name} are not valid JSON'
    if not isinstance(arguments, dict):
        return f'the "arguments" of {name} are not a JSON object'
    return name.strip(), arguments


def _unfit(name: str, arguments: dict[str, Any], offered: Offered) -> str | None:
    """Why the call cannot be run as written (None: it can)."""
    schema = offered.get(name)
    if schema is None:
        known = ", ".join(sorted(offered)) or "none"
        return f'there is no tool named "{name}" (the tools offered: {known})'
    wrong = schema_problem(dict(schema), arguments)
    return None if wrong is None else f"the arguments of {name} do not fit its schema: {wrong}"


def schema_problem(schema: dict[str, Any], instance: Any) -> str | None:
    """The first way `instance` breaks `schema`, for a person (None: it fits, or the schema
    itself cannot be used, in which case the tool is left to judge its arguments)."""
    from acp_server.schemas import describe, quick_accept

    if quick_accept(schema, instance):
        return None
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        kind = validator_for(schema, default=Draft202012Validator)
        kind.check_schema(schema)
        errors = sorted(kind(schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
    except SchemaError:
        return None
    if not errors:
        return None
    first = errors[0]
    return describe(first.absolute_path, first.message, first.validator, first.validator_value)


def _strip_fence(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return (rest if first.strip().isalpha() or not first.strip() else body).strip()
    return text
