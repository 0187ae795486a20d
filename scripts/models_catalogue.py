"""Regenerate acp_server/backends/model_catalogue.json from LiteLLM's model table.

LiteLLM (MIT licensed) keeps `model_prices_and_context_window.json`, the most widely used and
most often updated table of hosted models' context windows, output limits and abilities, each
entry citing the vendor page it comes from. The agent does not depend on LiteLLM (a 40 MB
package for one table); this script keeps the few fields the agent uses, for the major
vendors, in a small file shipped with the package, with the version it came from recorded.

    pip download --no-deps -d /tmp/litellm litellm
    python scripts/models_catalogue.py /tmp/litellm/litellm-*.whl

To add or correct a model by hand, add it to EXTRA below (with the page it comes from) and run
the script again: the JSON file is generated, never edited.
"""

from __future__ import annotations

import datetime
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

TABLE = "litellm/model_prices_and_context_window_backup.json"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "acp_server" / "backends" / "model_catalogue.json"
# LiteLLM provider -> the vendor whose own API it is. The first provider that names a model
# wins, so a vendor's own entry is kept over a reseller's copy of the same name.
PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "deepseek": "deepseek",
    "mistral": "mistral",
    "xai": "xai",
    "dashscope": "qwen",
    "groq": "groq",
    "together_ai": "together",
}
SKIPPED_WORDS = ("audio", "realtime", "search", "tts", "transcribe", "image", "embed", "ft:")
# Models the table lacks or gets wrong: {id: (fields, source page)}.
EXTRA: dict[str, dict[str, Any]] = {}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    wheel = Path(argv[1])
    with zipfile.ZipFile(wheel) as archive:
        table = json.loads(archive.read(TABLE))
    version = wheel.name.split("-")[1]
    models = select(table)
    models.update(EXTRA)
    out = {
        "source": {
            "name": "LiteLLM model_prices_and_context_window.json",
            "version": version,
            "license": "MIT",
            "generated": datetime.date.today().isoformat(),
        },
        "models": dict(sorted(models.items())),
    }
    OUT.write_text(one_model_a_line(out), encoding="utf-8")
    print(f"wrote {len(models)} models to {OUT}", file=sys.stderr)
    return 0


def one_model_a_line(out: dict[str, Any]) -> str:
    """The JSON text with one model on each line (small, and diffs read well)."""
    rows = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in out["models"].items()]
    models = ",\n".join(rows)
    return f'{{"source": {json.dumps(out["source"])},\n"models": {{\n{models}\n}}}}\n'


def select(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The chat models of the major vendors, by their bare id, with the fields the agent uses."""
    out: dict[str, dict[str, Any]] = {}
    for provider, vendor in PROVIDERS.items():
        for key, entry in table.items():
            if not isinstance(entry, dict) or entry.get("litellm_provider") != provider:
                continue
            name = key.removeprefix(f"{provider}/")
            if entry.get("mode") != "chat" or any(w in name for w in SKIPPED_WORDS):
                continue
            if not entry.get("max_input_tokens") or name in out:
                continue
            out[name] = facts(vendor, name, entry)
    return out


def facts(vendor: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    reasoning = bool(entry.get("supports_reasoning"))
    out: dict[str, Any] = {
        "vendor": vendor,
        "window": entry["max_input_tokens"],
        "output": entry.get("max_output_tokens"),
        "reasoning": reasoning,
        "images": entry.get("supports_vision"),
        "tools": entry.get("supports_function_calling"),
    }
    if vendor == "openai" and reasoning and "chat" not in name:
        # OpenAI's reasoning models refuse `max_tokens` and any temperature but the default
        # (the `-chat` variants are ChatGPT's models, which take no reasoning parameters).
        out["params"] = {"limit": "max_completion_tokens", "temperature": False}
    if entry.get("supports_adaptive_thinking"):
        out["params"] = {"thinking": "adaptive"}  # Claude's `{"type": "adaptive"}` thinking
    if entry.get("source"):
        out["doc"] = entry["source"]
    return {k: v for k, v in out.items() if v is not None}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
