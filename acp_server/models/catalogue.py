"""The models a session can choose from, and the ACP config options that offer them.

The catalogue holds every `--model` given (in order; the first is the default), the models of
the configuration file, and models discovered on local servers (added later, with
`with_discovered`). Each has a value id that is **stable and opaque**: Zed saves the chosen id
and applies it to every new session, so it must mean the same model next week. It is
`PROVIDER:MODEL`, which for command-line models is exactly the `DIALECT:MODEL` text given.
Model ids contain `/` and `:` (`ollama:hf.co/org/Qwen3-8B-GGUF:Q4_K_M`), so a value is split at
its first colon only, and provider names never contain one.

The option builders follow what the editors do with them (docs/CLIENTS.md): values grouped by
provider, display names short (Zed cuts at 32 characters) and distinct (Zed searches by name),
window and price in the description (shown on hover). `thought_level` is offered only for a
model that can reason, with that model's levels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from acp_server import redaction
from acp_server.backends.catalog import ModelFacts, lookup_at
from acp_server.backends.sampling import Sampling
from acp_server.config.file import Config, ModelConfig, Price, Provider, builtin_providers
from acp_server.errors import InvalidParams
from acp_server.settings import Settings
from acp_server.thought import DESCRIPTIONS, NAMES, clamp, guess

if TYPE_CHECKING:
    # Imported when a history is carried over, not when a session starts (carryover brings
    # the context package: ~10 ms that session/new does not need).
    from acp_server.models.carryover import IdStyle, Target

MODEL_OPTION = "model"
THOUGHT_OPTION = "thought_level"
MODEL_ENV = "ACP_SERVER_MODEL"
NAME_LIMIT = 32  # Zed cuts longer labels
# The reply reserve of a model that thinks before it answers (its thinking counts as output):
# the default quarter-of-the-window-up-to-4,096 would cut its answers short.
THINKING_RESERVE = 16_384
# The dialects whose model ids name hosted models the catalogue may know (an Ollama server
# reports its own windows, and its model names are its own).
CATALOGUED_DIALECTS = ("openai", "anthropic")
VENDORS = {"openai": "OpenAI", "anthropic": "Anthropic", "ollama": "Ollama"}


class ModelChoiceError(ValueError):
    """A model named on the command line or in the environment cannot be used; the message
    says how to write it."""


class UnknownModel(InvalidParams):
    """`session/set_config_option` (or `session/set_model`) named a model that is not offered."""


@dataclass(frozen=True)
class ModelEntry:
    """One model as a session offers it."""

    value: str  # stable opaque id: PROVIDER:MODEL
    provider: Provider
    model: str  # the id the provider's server knows
    name: str = ""  # the display name (set by the catalogue: short and distinct)
    configured_name: str | None = None
    window: int | None = None
    reply_reserve: int | None = None
    price: Price | None = None
    tools: bool = True
    images: bool | None = None  # None: not known yet; images are sent until refused
    levels: tuple[str, ...] = ()  # thought levels; () for a model that does not reason
    adaptive_thinking: bool = False
    id_style: IdStyle = "standard"
    origin: str = "command line"  # "command line", "configuration file", "discovered"
    facts: ModelFacts | None = None  # what the model catalogue (backends.catalog) knows
    sampling: Sampling = field(default_factory=Sampling)  # as configured (the env may override)

    @property
    def dialect(self) -> str:
        return self.provider.dialect

    def target(self) -> Target:
        """What a carried-over history must fit to be sent to this model."""
        from acp_server.models.carryover import Target

        return Target(self.dialect, self.model, self.images is not False, self.id_style)

    def known_window(self) -> tuple[int | None, str]:
        """(window, where it comes from) as known before the server is asked: the configuration
        file's, else the model catalogue's; (None, "") when neither says."""
        if self.window:
            return self.window, "configured"
        if self.facts is not None and self.facts.window:
            return self.facts.window, "model catalogue"
        return None, ""

    def budget_settings(self, settings: Settings) -> Settings:
        """The session's context settings for this model: the configuration file's
        `reply_reserve` (unless the environment set one), a larger reserve for a model the
        catalogue says thinks first."""
        if settings.reply_reserve is not None:
            return settings
        reserve = self.reply_reserve
        if reserve is None and self.facts is not None and self.facts.reasoning:
            reserve = min(self.facts.output or THINKING_RESERVE, THINKING_RESERVE)
        return replace(settings, reply_reserve=reserve) if reserve is not None else settings

    def description(self) -> str:
        """What a person sees on hover: the id, the window, the price, the abilities."""
        parts = [self.value]
        window, origin = self.known_window()
        if window:
            parts.append(f"{_tokens(window)} context ({origin})")
        if self.price is not None:
            parts.append(_price(self.price))
        if self.images is not None:
            parts.append("reads images" if self.images else "text only")
        if self.levels:
            parts.append("can think first")
        if not self.tools:
            parts.append("no tools")
        return " · ".join(parts)


@dataclass(frozen=True)
class Catalogue:
    """The models on offer, in order, and which one new sessions start with."""

    entries: tuple[ModelEntry, ...]
    default: str | None  # a value id; None: no model chosen (probe local servers)
    providers: Mapping[str, Provider] = field(default_factory=dict)
    compaction: str | None = None  # a cheaper model for compaction summaries
    subagent: str | None = None  # the model of the task tool's subagents

    def find(self, value: str) -> ModelEntry | None:
        return next((e for e in self.entries if e.value == value), None)

    def resolve(self, value: object, field_name: str = "value") -> ModelEntry:
        """The entry for a value id; an unlisted `PROVIDER:MODEL` on a known provider is
        accepted as it is (a saved choice of a model not discovered yet). Raises UnknownModel
        (-32602) naming the value otherwise."""
        if isinstance(value, str):
            found = self.find(value)
            if found is not None:
                return found
            provider, _, model = value.partition(":")
            if model and provider in self.providers:
                entry = _entry(ModelConfig(provider, model), self.providers[provider], "chosen")
                return replace(entry, name=_short_name(entry))
        listed = ", ".join(e.value for e in self.entries[:8]) or "none"
        raise UnknownModel(
            f"Invalid params: `{field_name}` names no model this agent offers: {value!r}. "
            f"Offered: {listed}. Write a model as PROVIDER:MODEL with a provider among "
            f"{', '.join(self.providers)}.",
            {"field": field_name, "value": value},
        )

    def with_discovered(
        self, found: Iterable[ModelConfig], providers: Iterable[Provider] = ()
    ) -> Catalogue:
        """The catalogue with models found on local servers added (known ones are kept as
        they are), and the providers discovery made up for servers no provider points at
        (`backends.selection.discover.Discovered`); display names are made distinct again."""
        known = {e.value for e in self.entries}
        offered = {**{p.name: p for p in providers}, **self.providers}
        added = [
            _entry(m, offered[m.provider], "discovered")
            for m in found
            if m.value not in known and m.provider in offered
        ]
        return replace(self, entries=_named([*self.entries, *added]), providers=offered)


def model_values(options: Sequence[str] | None, env: Mapping[str, str]) -> list[str]:
    """The models named at start: every `--model` (repeatable), else ACP_SERVER_MODEL as a
    comma-separated list."""
    if options:
        return [text.strip() for text in options if text.strip()]
    return [part.strip() for part in env.get(MODEL_ENV, "").split(",") if part.strip()]


def build_catalogue(values: Sequence[str], config: Config) -> Catalogue:
    """The catalogue of command-line models (first = default) and the configured ones."""
    providers = {p.name: p for p in config.providers} or builtin_providers({})
    configured = {m.value: m for m in config.models}
    entries: dict[str, ModelEntry] = {}
    for text in values:
        provider, model = split_value(text, providers)
        described = configured.get(f"{provider}:{model}", ModelConfig(provider, model))
        entries.setdefault(described.value, _entry(described, providers[provider], "command line"))
    for m in config.models:
        entries.setdefault(m.value, _entry(m, providers[m.provider], "configuration file"))
    default = next(iter(entries), None) if values else None
    default = default or config.default_model or next(iter(entries), None)
    named = _named(list(entries.values()))
    return Catalogue(named, default, providers, config.compaction_model, config.subagent_model)


def split_value(text: str, providers: Mapping[str, Provider]) -> tuple[str, str]:
    """PROVIDER:MODEL split at the first colon (model ids contain `/` and `:`)."""
    provider, sep, model = text.partition(":")
    if not sep or not model.strip() or provider not in providers:
        raise ModelChoiceError(
            f"Cannot use model {text!r}: write it as PROVIDER:MODEL, where PROVIDER is one of "
            f"{', '.join(providers)} (for example ollama:qwen3:8b or openai:gpt-4.1-mini)."
        )
    return provider, model


def _entry(m: ModelConfig, provider: Provider, origin: str) -> ModelEntry:
    catalogued = provider.dialect in CATALOGUED_DIALECTS
    facts = lookup_at(m.id, provider.base_url) if catalogued else None
    levels, adaptive = guess(provider.dialect, m.id)
    if not levels and facts is not None:
        levels, adaptive = _catalogue_levels(provider.dialect, facts)
    images = m.images if m.images is not None or facts is None else facts.images
    return ModelEntry(
        value=m.value,
        provider=provider,
        model=m.id,
        configured_name=m.name,
        window=m.window,
        reply_reserve=m.reply_reserve,
        price=m.price,
        tools=True if m.tools is None else m.tools,
        images=images,
        levels=levels if m.reasoning is None else m.reasoning,
        adaptive_thinking=adaptive if m.adaptive_thinking is None else m.adaptive_thinking,
        id_style="mistral" if m.tool_call_ids == "mistral" else "standard",
        origin=origin,
        facts=facts,
        sampling=Sampling(m.temperature, m.top_p),
    )


def _catalogue_levels(dialect: str, facts: ModelFacts) -> tuple[tuple[str, ...], bool]:
    """Thought levels for a model the name table does not know but the catalogue says thinks:
    a newer Claude (adaptive thinking when the catalogue says so), or an OpenAI reasoning model
    (`reasoning_effort`). Other vendors' knobs differ: they are offered none."""
    if not facts.reasoning:
        return (), False
    if dialect == "anthropic" and facts.vendor == "anthropic":
        if facts.adaptive_thinking:
            return ("off", "on", "low", "medium", "high"), True
        return ("off", "low", "medium", "high"), False
    if dialect == "openai" and facts.completion_tokens:
        return ("low", "medium", "high"), False
    return (), False


# ----- display names ----------------------------------------------------------------------------


def _named(entries: list[ModelEntry]) -> tuple[ModelEntry, ...]:
    """The entries with display names that are short and distinct: the configured name, else
    the model id's last path part; on a clash the whole id, then the provider, then a number."""
    names = [_fit(e.configured_name or _short_name(e)) for e in entries]
    for widen in (_whole_id, _with_provider):
        clashing = {n for n, count in Counter(names).items() if count > 1}
        names = [
            _fit(widen(e)) if n in clashing and not e.configured_name else n
            for e, n in zip(entries, names, strict=True)
        ]
    seen: Counter[str] = Counter()
    unique: list[str] = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else _fit(name, suffix=f" {seen[name]}"))
    return tuple(replace(e, name=n) for e, n in zip(entries, unique, strict=True))


def _short_name(entry: ModelEntry) -> str:
    return entry.model.rstrip("/").rsplit("/", 1)[-1] or entry.model


def _whole_id(entry: ModelEntry) -> str:
    return entry.model


def _with_provider(entry: ModelEntry) -> str:
    return f"{_short_name(entry)} ({entry.provider.name})"


def _fit(name: str, suffix: str = "") -> str:
    """`name + suffix` within the limit, cut in the middle (the end tells sizes and variants)."""
    room = NAME_LIMIT - len(suffix)
    if len(name) > room:
        head = (room - 1) // 2
        name = name[:head] + "…" + name[len(name) - (room - 1 - head) :]
    return name + suffix


# ----- ACP config options -----------------------------------------------------------------------


def model_options(
    catalogue: Catalogue, current: ModelEntry, level: str | None
) -> list[dict[str, Any]]:
    """The `model` option and, for a model that can reason, the `thought_level` option: the
    entries to append to the `mode` option (session_config.config_options)."""
    options = [model_option(catalogue, current)]
    thought = thought_option(current, level)
    return [*options, thought] if thought is not None else options


def model_option(catalogue: Catalogue, current: ModelEntry) -> dict[str, Any]:
    entries = list(catalogue.entries)
    if catalogue.find(current.value) is None:
        entries.append(current)  # a chosen model not listed (yet): shown all the same
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        # Names and descriptions may come from a model server: hidden like its error bodies.
        value = {
            "value": entry.value,
            "name": redaction.redact(entry.name),
            "description": redaction.redact(entry.description()),
        }
        groups.setdefault(entry.provider.name, []).append(value)
    return {
        "id": MODEL_OPTION,
        "name": "Model",
        "description": "The model that answers. The conversation carries over when you switch.",
        "category": "model",
        "type": "select",
        "currentValue": current.value,
        "options": [
            {
                "group": name,
                "name": provider_label(catalogue.providers.get(name)),
                "options": values,
            }
            for name, values in groups.items()
        ],
    }


def thought_option(entry: ModelEntry, level: str | None) -> dict[str, Any] | None:
    """The `thought_level` option for the model (None for a model that cannot reason)."""
    current = clamp(level, entry.levels, entry.dialect)
    if current is None:
        return None
    return {
        "id": THOUGHT_OPTION,
        "name": "Thinking",
        "description": "How much the model thinks before it answers.",
        "category": "thought_level",
        "type": "select",
        "currentValue": current,
        "options": [
            {"value": lv, "name": NAMES[lv], "description": DESCRIPTIONS[lv]} for lv in entry.levels
        ],
    }


def parse_level(value: object, entry: ModelEntry, field_name: str = "value") -> str:
    """A thought level the model supports; InvalidParams (-32602) naming the value otherwise."""
    if isinstance(value, str) and value in entry.levels:
        return value
    allowed = ", ".join(entry.levels)
    because = f"one of {allowed}" if allowed else "nothing: this model does not think first"
    raise InvalidParams(
        f"Invalid params: `{field_name}` for {THOUGHT_OPTION} with model {entry.name} can be "
        f"{because}; got {value!r}.",
        {"field": field_name, "allowed": list(entry.levels)},
    )


def provider_label(provider: Provider | None) -> str:
    """A group header: the vendor for its own API, else the provider and where it runs."""
    if provider is None:
        return "Other"
    vendor = VENDORS.get(provider.name)
    defaults = builtin_providers({})
    default = defaults.get(provider.name)
    if vendor and default is not None and provider.base_url == default.base_url:
        return vendor
    host = urlsplit(provider.base_url).netloc.rsplit("@", 1)[-1] or provider.base_url
    return f"{vendor or provider.name} · {host}"


def _tokens(n: int) -> str:
    if n >= 1_000_000:  # 1,047,576 is "1M", 1,500,000 "1.5M"
        return f"{n / 1_000_000:.1f}".removesuffix(".0") + "M"
    return f"{round(n / 1000)}k" if n >= 1000 else str(n)


def _price(price: Price) -> str:
    if price.input == 0 and price.output == 0:
        return "free"
    return f"${price.input:g} in, ${price.output:g} out per million tokens"
