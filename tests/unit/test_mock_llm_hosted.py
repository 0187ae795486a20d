"""The strict mock as api.openai.com and as an older Ollama: reasoning models refuse
`max_tokens` and a temperature with OpenAI's own 400 bodies, `/v1/models` tells no window, and
`cache_net` counts only the prompt tokens a cache did not hold."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.mock_llm import MockLLM, running_mock_llm

ASK = [{"role": "user", "content": "hi"}]


async def post(llm: MockLLM, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(llm.url + path, json=body)


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": "o3", "max_tokens": 10}, "max_tokens", "unsupported_parameter"),
        ({"model": "gpt-5-mini", "temperature": 0.2}, "temperature", "unsupported_value"),
        ({"model": "o4-mini", "top_p": 0.5}, "top_p", "unsupported_value"),
    ],
)
async def test_reasoning_models_refuse_what_openai_refuses(
    body: dict[str, Any], param: str, code: str
) -> None:
    async with running_mock_llm(strict_dialect=True) as llm:
        answer = await post(llm, "/v1/chat/completions", {**body, "messages": ASK})
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert (error["type"], error["param"], error["code"]) == (
            "invalid_request_error",
            param,
            code,
        )
        assert llm.invalid and llm.chat_requests == llm.requests


async def test_what_they_take_and_what_other_models_take() -> None:
    async with running_mock_llm(strict_dialect=True) as llm:
        for body in (
            {"model": "o3", "max_completion_tokens": 10, "temperature": 1},
            {"model": "gpt-4.1", "max_tokens": 10, "temperature": 0.2},
            {"model": "gpt-5-chat-latest", "max_tokens": 10},
        ):
            answer = await post(llm, "/v1/chat/completions", {**body, "messages": ASK})
            assert answer.status_code == 200, (body, answer.text)
        assert llm.invalid == []


async def test_the_model_list_tells_no_window_as_api_openai_com() -> None:
    async with running_mock_llm() as llm:
        llm.set(models=["gpt-4.1", "o3"])
        async with httpx.AsyncClient() as client:
            listed = (await client.get(llm.url + "/v1/models")).json()
            props = await client.get(llm.url + "/props")
        assert [m["id"] for m in listed["data"]] == ["gpt-4.1", "o3"]
        assert not any("context" in key for m in listed["data"] for key in m)
        assert props.status_code == 404


async def test_cache_net_counts_only_what_extends_the_previous_prompt() -> None:
    async with running_mock_llm(cache_net=True) as llm:
        first = {"model": "m", "messages": ASK, "stream": False}
        longer = {**first, "messages": [*ASK, {"role": "assistant", "content": "yo"}, *ASK]}
        counts = []
        for body in (first, longer, first):
            answer = (await post(llm, "/api/chat", body)).json()
            counts.append(answer["prompt_eval_count"])
        assert counts[0] == llm.counted[0]  # nothing cached yet: the whole prompt
        assert counts[1] == llm.counted[1] - llm.counted[0]  # only what is new
        assert counts[2] == llm.counted[2]  # a new prefix: the whole prompt again
