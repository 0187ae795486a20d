"""The editor configurations in `editor-configs/` say what each editor needs to work."""

from __future__ import annotations

import re
from pathlib import Path

CONFIGS = Path(__file__).parents[2] / "editor-configs"


def test_avante_passes_the_environment_the_agent_needs() -> None:
    # avante starts the agent with only PATH in its environment: without these entries no API
    # key, no ACP_SERVER_* setting and no HOME ever reach it.
    text = (CONFIGS / "avante.lua").read_text(encoding="utf-8")
    assert re.search(r"--.*only\s+`?PATH`?", text), "the file must say why `env` matters"
    env = text[text.index("env = {") :]
    env = env[: env.index("}")]
    for name in ("HOME", "ACP_SERVER_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert re.search(rf"\b{name}\s*=", env), f"{name} is missing from env"
    assert 'HOME = os.getenv("HOME")' in env
