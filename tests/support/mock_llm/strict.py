"""`strict_dialect=True`: each chat request checked the way the real API checks it.

The checks are those of tests/support/strict_dialects.py, per endpoint: OpenAI chat completions
(every `tool` message answers a call of the assistant message before it), Anthropic Messages
(roles alternate, every `tool_result` answers a `tool_use` of the previous turn, thinking blocks
carry a signature this server issued *to the requested model*), Ollama `/api/chat` (its native
shapes). A request that fails is answered HTTP 400 with the vendor's error body, as the API
would, and recorded with its reasons in `MockLLM.invalid`.

Signatures: each thinking block the server streams gets a signature unique to the model that
"made" it (`sig-<model>-<n>`, unless the script sets `signature`), noted in `signatures`, so a
history carried from one Claude model to another is refused as the API refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.support.mock_llm import anthropic, ollama, openai, responses
from tests.support.mock_llm.script import Dialect
from tests.support.strict_dialects import anthropic_problems, ollama_problems, openai_problems
from tests.support.strict_gemini import gemini_problems, is_gemini3
from tests.support.strict_responses import is_reasoning_model, responses_problems

__all__ = ["is_gemini3", "is_reasoning_model", "problems", "signature_for"]


def problems(
    dialect: Dialect,
    body: Any,
    signatures: Mapping[str, str],
    reasoning: Mapping[str, Mapping[str, Any]] | None = None,
    calls: Mapping[str, list[str]] | None = None,
) -> list[str]:
    """What the real API of `dialect` would refuse in this request body ([]: nothing)."""
    if not isinstance(body, dict):
        return ["the request body must be a JSON object"]
    if dialect is openai.DIALECT:
        return openai_problems(body) + gemini_problems(body, signatures)
    if dialect is responses.DIALECT:
        return responses_problems(body, reasoning, calls)
    if dialect is anthropic.DIALECT:
        return anthropic_problems(body, signatures)
    if dialect is ollama.DIALECT:
        return ollama_problems(body)
    return []


def signature_for(model: str, signatures: dict[str, str], given: str | None, plain: str) -> str:
    """The signature of a thinking block the server is about to send, noted for `model`:
    the script's, else `plain` (the mock's usual "sig-1"), else (strict: `plain` is "") one
    unique to the model."""
    signature = given or plain or f"sig-{model}-{len(signatures) + 1}"
    signatures[signature] = model
    return signature
