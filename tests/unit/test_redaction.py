"""Redaction: known keys and labelled credentials never survive into text we show or log, and
the commands the model runs do not get the agent's keys."""

from __future__ import annotations

import uuid

import pytest

from acp_server import redaction
from acp_server.redaction import REDACTED, command_environment, redact, remember_headers


def fresh_key(prefix: str = "sk-test-") -> str:
    return prefix + uuid.uuid4().hex


def test_a_key_in_a_key_variable_is_redacted_wherever_it_appears(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = fresh_key()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    assert (
        redact(f"Incorrect API key provided: {key}.") == f"Incorrect API key provided: {REDACTED}."
    )
    assert key not in redact(f"prefix{key}suffix")


def test_a_key_a_request_carried_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    key = fresh_key()
    remember_headers([("Authorization", f"Bearer {key}"), ("User-Agent", "python-httpx/0.28")])
    assert redact(f"you sent {key}") == f"you sent {REDACTED}"
    assert redact("python-httpx/0.28") == "python-httpx/0.28"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdefgh12345", f"Authorization: Bearer {REDACTED}"),
        (
            "(b'authorization', b'Bearer abcdefgh12345')",
            f"(b'authorization', b'Bearer {REDACTED}')",
        ),
        ("x-api-key: sk-ant-whatever-1234", f"x-api-key: {REDACTED}"),
        ('{"api_key": "abc123456789"}', f'{{"api_key": "{REDACTED}"}}'),
        ("OPENAI_API_KEY=abc123456789 rest", f"OPENAI_API_KEY={REDACTED} rest"),
        ("Check the API key in the OPENAI_API_KEY variable.", None),
        ("a Bearer token is needed", None),
    ],
)
def test_labelled_credentials_are_redacted(text: str, expected: str | None) -> None:
    assert redact(text) == (text if expected is None else expected)


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact("Authorization: Bearer abcdefgh12345")
    assert redact(once) == once


def test_short_placeholders_are_not_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "ollama")
    assert redact("the ollama server") == "the ollama server"


def test_commands_get_no_key_variable_and_no_copy_of_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = fresh_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    env = {"ANTHROPIC_API_KEY": key, "OPENAI_API_KEY": "x", "MY_COPY": key, "HOME": "/h"}
    assert command_environment(env) == {"HOME": "/h"}


def test_a_variable_a_backend_names_counts_as_a_key_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = f"ACP_TEST_KEY_{uuid.uuid4().hex[:6].upper()}"
    monkeypatch.setenv(name, fresh_key())
    redaction.remember_variable(name)
    assert name in redaction.key_variables()
    assert name not in command_environment({name: "anything", "PATH": "/bin"})


def test_an_editors_mcp_server_tokens_are_hidden_everywhere() -> None:
    from acp_server.tools.mcp.config import from_editor

    token, key = f"tok-{uuid.uuid4().hex}", f"key-{uuid.uuid4().hex}"
    from_editor(
        [
            {
                "name": "tracker",
                "type": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": f"Bearer {token}"},
            },
            {"name": "docs", "command": "docs-mcp", "args": [], "env": {"DOCS_API_KEY": key}},
        ],
        acp_allowed=False,
    )
    shown = redact(f"connect failed: {token} / {key}")
    assert token not in shown and key not in shown


def test_tool_results_lose_the_known_keys_and_keep_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = fresh_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    code = 'api_key = os.environ["KEY"]  # Authorization: Bearer abcdefghij'
    assert redaction.hide_keys(f"{code}\n{key}") == f"{code}\n{REDACTED}"  # code reads as it is
    update = {"content": [{"text": f"x{key}x", "n": 3}], "raw": (key, None)}
    assert redaction.hide_keys_in(update) == {
        "content": [{"text": f"x{REDACTED}x", "n": 3}],
        "raw": (REDACTED, None),
    }
