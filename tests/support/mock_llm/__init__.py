"""A real HTTP/1.1 mock LLM server for tests: four wire dialects, scripted replies, faults.

Why a socket server and not `httpx.MockTransport`: the agent under test may be a separate
`acp-server` process, and transport faults (a cut connection, a stalled stream, a slow first
byte) only exist on a real socket. Stdlib asyncio only; one request per connection
(`Connection: close`); streams are chunked unless a response says `"chunked": False`.

Layout: `server` (routing, the script queue, faults), `discovery` (the endpoints that tell
about models), `http_io` (one request in, one response out), `script` (a scripted response
split into pieces, the shape of a dialect), one module per dialect: `openai`, `responses`
(OpenAI's Responses API), `anthropic`, `ollama`; `view` (any dialect's request read as one
neutral conversation, its token count, the strict tool check) and `responders`.

Small-server options (`MockLLM(...)`, `running_mock_llm(...)`, or attributes while it runs):
`window=N` counts each chat request's prompt (`view.count_tokens`: the JSON of system,
messages and tools at 3.2 characters a token, stricter than the agent's estimate; an image is
1,000) and refuses one over N with HTTP 400 and the dialect's overflow error (llama.cpp's
`exceed_context_size_error` body with `n_prompt_tokens`/`n_ctx`; Anthropic's "prompt is too
long: P tokens > N maximum"; Ollama's "the input length exceeds the context length"), without
consuming a queued response; `report_window=N` tells N where servers do (as
`set(context_length=N)`); `cap_prompt_tokens=N` reports `prompt_tokens = min(real, N)` (a
server that silently cut the prompt); `responder=f(request_json) -> response dict` answers
when the queue is empty (`responders.file_reader()` plays a long tool-heavy session);
`strict_tools=True` refuses (HTTP 400) a history with an orphaned tool result or a tool call
without its result; `strict_dialect=True` refuses (HTTP 400, the vendor's error body) whatever
the real API of the endpoint refuses (tests/support/strict_dialects.py: OpenAI tool pairing,
Anthropic alternation, tool_result pairing and thinking signatures of the requested model,
Ollama's native shapes; the Responses API: tests/support/strict_responses.py; Gemini 3's thought
signatures: tests/support/strict_gemini.py), and signs each thinking block for the model that
made it (`signatures`: signature -> model). A Responses reasoning model (gpt-5, o3, ...) reasons:
each response carries reasoning items (two before tool calls, else one; `reasoning_items=N` in
a script sets it) with encrypted content unique to the model, noted in `reasoning` (id -> item)
and `reasoning_calls` (call id -> the reasoning item ids before it); its call ids are unique. A
`gemini-3*` model on chat completions signs the first tool call of each reply
(`extra_content.google.thought_signature`, noted in `signatures`). Records: `requests`
(every request, body included), `counted` (the prompt tokens of each chat request that passed
the validator), `overflows` (requests refused for the window), `invalid` ((request, reason)
refused by a strict check).
With `strict_dialect`, OpenAI's reasoning models (o1, o3, o4-mini, gpt-5...) also refuse
`max_tokens` and a temperature on chat completions with api.openai.com's own 400 bodies
(strict_openai_models.py). `cache_net=True` makes Ollama's `prompt_eval_count` net of a prompt
cache (a request extending the previous one counts only its new tokens), as older Ollama
servers report it.
`api_key=K` refuses (HTTP 401) every request that does not carry K (`Authorization: Bearer K`
or `x-api-key: K`), as a server that needs a key does.

Endpoints: `POST /v1/chat/completions` (OpenAI SSE), `POST /v1/responses` (Responses SSE),
`POST /v1/messages` (Anthropic SSE), `POST /api/chat` (Ollama NDJSON), and discovery:
`GET /v1/models`, `GET /props` (llama.cpp), `GET /api/tags` and `POST /api/show` (Ollama).
Every request is recorded in `MockLLM.requests`.

A scripted response is a dialect-neutral dict; the endpoint that receives it picks the wire:

    text, thought, reasoning_field ("reasoning_content" | "reasoning"), signature,
    tool_calls [{id, name, arguments: dict | raw str}], parallel, ollama_ids,
    finish ("stop" | "length" | "tool_calls" | "content_filter"),
    usage {prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens} | None,
    chunk_words, delay_ms, chunked, headers (extra response headers, e.g. one echoing a key),
    fault: status | html | cut | error_frame | slow_first_byte | stall | empty_stream |
           repeat_ids | reject_null_content | reject_stream_options | inline_tool_call
    fault parameters: status, retry_after, body, after (frames sent before a cut, a stall
           or an error frame), seconds, message, error_type, name + arguments, piece_chars.

Defaults worth knowing: `finish` is "tool_calls" when there are tool calls, else "stop"; `usage`
defaults to prompt_tokens = the prompt as counted for `window` (errs high) and is omitted
entirely with `"usage": None`; `prompt_tokens` is the whole prompt (OpenAI meaning), so
Anthropic gets input_tokens = prompt - cached - cache_creation. `after` defaults to half the
content frames (0 for error_frame). Tool ids default to call_mockN / toolu_mockN; Ollama tool
calls carry no id unless `ollama_ids` (older Ollama sends none). `stream` defaults to false for
OpenAI and Anthropic and to true for Ollama, as the real servers do. `reject_stream_options`
stays queued when it rejects; `reject_null_content` is consumed either way. An empty queue asks
the responder, or answers NO_SCRIPT_TEXT with finish "stop". Discovery: `set(context_length=N)`
feeds /v1/models `context_length`, /props `default_generation_settings.n_ctx`, /api/show
`model_info["<arch>.context_length"]` and `parameters` num_ctx; `n_ctx`, `num_ctx`,
`n_ctx_train` (llama.cpp's /v1/models `meta`), `arch` and `model` override; `models` (a list)
makes the server have several (listed by /v1/models and /api/tags; /api/show answers 404 for
others); `capabilities` (a list, or {model: list}) is what /api/show says a model can do
(default: completion, tools, thinking: no vision); `vision=True` makes /props say it reads
images. /props answers 404
while no window is known (a server that is not llama.cpp).
"""

from tests.support.mock_llm.http_io import Recorded
from tests.support.mock_llm.script import ERROR_FRAME_TEXT, NO_SCRIPT_TEXT, Response
from tests.support.mock_llm.server import (
    CHAT_PATHS,
    MockLLM,
    Responder,
    mock_llm,
    running_mock_llm,
)

__all__ = [
    "CHAT_PATHS",
    "ERROR_FRAME_TEXT",
    "NO_SCRIPT_TEXT",
    "MockLLM",
    "Recorded",
    "Responder",
    "Response",
    "mock_llm",
    "running_mock_llm",
]
