"""Strict checks of an OpenAI Responses request body, the way the API checks it.

Pure: a request body (as it would be POSTed to `/v1/responses`) and what the server issued
(`issued`: reasoning item id -> {"model", "encrypted_content"}; `calls`: call id -> the ids of the
reasoning items of the response that made the call, in order) to a list of problems worded like
the API's 400 answers; [] means the API would accept it. What is checked:

- top-level fields: only the API's (`max_tokens`, `messages` and other chat-completions fields are
  refused: "Unsupported parameter"), `max_output_tokens` an integer >= 16, `reasoning` with a
  known `effort`/`summary` and only for reasoning models, no `temperature`/`top_p` for them,
  `include` values the API knows, tools in the Responses shape (`name` at the top, not under
  `function`);
- input items: messages with known roles and parts (`input_text`/`input_image` for the user,
  `output_text`/`refusal` for the assistant), `function_call` with `call_id`, name and JSON text
  arguments, `function_call_output` answering a call made earlier in the input, every call
  answered, and only known fields on each item;
- reasoning items, with `store: false`: each must carry its `encrypted_content`, as issued for
  the requested model, and be followed by the item it preceded;
- and what makes reasoning survive tool rounds: in the current turn (after the last user
  message), a `function_call` the server made after reasoning must come back right after those
  reasoning items, each one separately and in order (none missing, none fused into another, none
  from another response). Earlier turns need none: a switch of model may have dropped them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tests.support.strict_common import IMAGE_TYPES, TOOL_NAME, is_base64, is_object_text

TOP_LEVEL = frozenset(
    {
        "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
        "max_output_tokens", "max_tool_calls", "reasoning", "include", "store", "stream",
        "stream_options", "temperature", "top_p", "text", "metadata", "previous_response_id",
        "truncation", "user", "service_tier", "prompt_cache_key", "safety_identifier",
        "background", "top_logprobs", "conversation", "prompt",
    }
)  # fmt: skip
INCLUDE = frozenset(
    {
        "reasoning.encrypted_content", "code_interpreter_call.outputs", "file_search_call.results",
        "message.input_image.image_url", "message.output_text.logprobs",
        "computer_call_output.output.image_url", "web_search_call.action.sources",
    }
)  # fmt: skip
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SUMMARIES = ("auto", "concise", "detailed")
REASONING_MODEL = re.compile(r"(gpt-[5-9](?!\d)(?!.*-chat)|o[1-9](?!\d)).*")
ITEM_FIELDS = {
    "message": {"type", "role", "content", "id", "status"},
    "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
    "function_call_output": {"type", "call_id", "output", "id", "status"},
    "reasoning": {"type", "id", "summary", "content", "encrypted_content", "status"},
}
DATA_URL = re.compile(r"data:(image/[a-z]+);base64,(.*)", re.DOTALL)


def is_reasoning_model(model: str) -> bool:
    return REASONING_MODEL.fullmatch(model.lower()) is not None


def responses_problems(
    body: Mapping[str, Any],
    issued: Mapping[str, Mapping[str, Any]] | None = None,
    calls: Mapping[str, list[str]] | None = None,
) -> list[str]:
    """What the Responses API would refuse in this body ([]: nothing)."""
    problems = [f"Unsupported parameter: '{key}'." for key in body if key not in TOP_LEVEL]
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return [*problems, "Missing required parameter: 'model'."]
    problems += _parameters(body, is_reasoning_model(model))
    items = body.get("input")
    if isinstance(items, str):
        return problems
    if not isinstance(items, list) or not items:
        return [*problems, "Invalid 'input': expected a string or a non-empty array of items."]
    stateless = body.get("store") is False
    problems += _items(items, model, stateless, issued or {})
    problems += _pairing(items)
    problems += _reasoning_kept(items, calls or {})
    return problems


def _parameters(body: Mapping[str, Any], reasons: bool) -> list[str]:
    problems: list[str] = []
    cap = body.get("max_output_tokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 16):
        problems.append(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16."
        )
    for name in ("temperature", "top_p"):
        if reasons and name in body:
            problems.append(f"Unsupported parameter: '{name}' is not supported with this model.")
    reasoning = body.get("reasoning")
    if reasoning is not None:
        problems += _reasoning(reasoning, reasons)
    include = body.get("include", [])
    if not isinstance(include, list) or any(value not in INCLUDE for value in include):
        problems.append(f"Invalid value in 'include': {include!r}.")
    if "tools" in body:
        problems += _tools(body["tools"])
    return problems


def _reasoning(reasoning: Any, reasons: bool) -> list[str]:
    if not isinstance(reasoning, dict):
        return ["Invalid type for 'reasoning': expected an object."]
    if not reasons:
        return ["Unsupported parameter: 'reasoning.effort' is not supported with this model."]
    problems = [
        f"Unknown parameter: 'reasoning.{k}'." for k in reasoning if k not in ("effort", "summary")
    ]
    if "effort" in reasoning and reasoning["effort"] not in EFFORTS:
        problems.append(f"Invalid value: {reasoning['effort']!r}. Supported values are: {EFFORTS}.")
    if "summary" in reasoning and reasoning["summary"] not in SUMMARIES:
        problems.append(f"Invalid value for 'reasoning.summary': {reasoning['summary']!r}.")
    return problems


def _tools(tools: Any) -> list[str]:
    if not isinstance(tools, list) or not tools:
        return ["Invalid 'tools': expected a non-empty array."]
    problems = []
    for n, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            problems.append(f"Invalid 'tools[{n}]': expected a function tool.")
        elif "function" in tool or not TOOL_NAME.fullmatch(str(tool.get("name", ""))):
            problems.append(f"Missing required parameter: 'tools[{n}].name'.")
        elif not isinstance(tool.get("parameters", {}), dict):
            problems.append(f"Invalid type for 'tools[{n}].parameters': expected an object.")
    return problems


# ----- input items --------------------------------------------------------------------------


def _items(
    items: list[Any], model: str, stateless: bool, issued: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    problems: list[str] = []
    for n, item in enumerate(items):
        where = f"input[{n}]"
        if not isinstance(item, dict):
            problems.append(f"Invalid type for '{where}': expected an object.")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        fields = ITEM_FIELDS.get(str(kind))
        if fields is None:
            problems.append(f"Invalid value for '{where}.type': {kind!r}.")
            continue
        problems += [f"Unknown parameter: '{where}.{k}'." for k in item if k not in fields]
        if kind == "message":
            problems += _message(where, item)
        elif kind == "function_call":
            problems += _function_call(where, item)
        elif kind == "function_call_output" and not isinstance(item.get("output"), str):
            problems.append(f"Invalid type for '{where}.output': expected a string.")
        elif kind == "reasoning":
            problems += _reasoning_item(where, item, items[n + 1 :], model, stateless, issued)
    return problems


def _message(where: str, item: dict[str, Any]) -> list[str]:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        return [f"Invalid value for '{where}.role': {role!r}."]
    content = item.get("content")
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"Invalid '{where}.content': expected a string or a non-empty array."]
    allowed = ("output_text", "refusal") if role == "assistant" else ("input_text", "input_image")
    problems = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            problems.append(
                f"Invalid value: {kind!r} in '{where}.content[{k}]'. Supported values are: "
                f"{' and '.join(repr(a) for a in allowed)}."
            )
        elif kind == "input_image" and not _image(part.get("image_url")):
            problems.append(f"Invalid '{where}.content[{k}].image_url': not a readable image.")
        elif kind in ("input_text", "output_text") and not isinstance(part.get("text"), str):
            problems.append(f"Missing required parameter: '{where}.content[{k}].text'.")
    return problems


def _image(url: Any) -> bool:
    match = DATA_URL.fullmatch(url) if isinstance(url, str) else None
    return match is not None and match.group(1) in IMAGE_TYPES and is_base64(match.group(2))


def _function_call(where: str, item: dict[str, Any]) -> list[str]:
    problems = []
    if not isinstance(item.get("call_id"), str) or not item["call_id"]:
        problems.append(f"Missing required parameter: '{where}.call_id'.")
    if not TOOL_NAME.fullmatch(str(item.get("name", ""))):
        problems.append(f"Invalid '{where}.name': must match ^[a-zA-Z0-9_-]{{1,64}}$.")
    if not is_object_text(item.get("arguments")):
        problems.append(f"Invalid '{where}.arguments': expected JSON object text.")
    return problems


def _reasoning_item(
    where: str,
    item: dict[str, Any],
    rest: list[Any],
    model: str,
    stateless: bool,
    issued: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    item_id = item.get("id")
    if not isinstance(item.get("summary"), list):
        return [f"Missing required parameter: '{where}.summary'."]
    if stateless and not item.get("encrypted_content"):
        return [
            f"Item with id {item_id!r} not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or remove this item from your input."
        ]
    known = issued.get(str(item_id))
    if known is None or known.get("encrypted_content") != item.get("encrypted_content"):
        return [f"The encrypted content for item {item_id} could not be verified."]
    if known.get("model") != model:
        return [f"The encrypted content for item {item_id} was made by another model."]
    following = next(
        (i for i in rest if isinstance(i, dict) and i.get("type") != "reasoning"), None
    )
    if following is None or following.get("type") not in ("function_call", "message"):
        return [
            f"Item {item_id!r} of type 'reasoning' was provided without its required "
            "following item."
        ]
    return []


def _pairing(items: list[Any]) -> list[str]:
    """Every output answers a call made before it; every call is answered."""
    problems = []
    made: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        call_id = str(item.get("call_id"))
        if item.get("type") == "function_call":
            made.add(call_id)
        elif item.get("type") == "function_call_output":
            if call_id not in made:
                problems.append(
                    f"No tool call found for function call output with call_id {call_id}."
                )
            answered.add(call_id)
    problems += [f"No tool output found for function call {c}." for c in sorted(made - answered)]
    return problems


def _reasoning_kept(items: list[Any], calls: Mapping[str, list[str]]) -> list[str]:
    """Each call of the current turn (after the last user message) made after reasoning comes
    back right after its reasoning items, in order. Earlier turns' reasoning is not needed."""
    problems = []
    users = [n for n, i in enumerate(items) if isinstance(i, dict) and i.get("role") == "user"]
    for n, item in enumerate(items):
        if n < max(users, default=-1) or not isinstance(item, dict):
            continue
        if item.get("type") != "function_call":
            continue
        wanted = calls.get(str(item.get("call_id")))
        if not wanted:
            continue
        found = _reasoning_before(items, n)
        if found != wanted:
            problems.append(
                f"Item for function call {item.get('call_id')} was provided without its "
                f"reasoning items {wanted} in order (found {found}): the model's reasoning "
                "between tool rounds was lost."
            )
    return problems


def _reasoning_before(items: list[Any], n: int) -> list[str]:
    """The ids of the reasoning items just before items[n], past the calls and assistant
    messages of the same reply."""
    found: list[str] = []
    k = n - 1
    while k >= 0 and isinstance(items[k], dict):
        kind = items[k].get("type")
        if kind == "reasoning":
            found.insert(0, str(items[k].get("id")))
        elif found or not (kind == "function_call" or items[k].get("role") == "assistant"):
            break
        k -= 1
    return found
