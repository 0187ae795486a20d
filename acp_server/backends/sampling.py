"""How a model picks its words: the temperature and top_p sent with each request.

The configuration file sets them per model (`temperature`, `top_p` in a `[[models]]` entry);
ACP_SERVER_TEMPERATURE and ACP_SERVER_TOP_P set them for every model and win over the file.
When neither says, nothing is sent and the server uses its own default, except for the `local`
provider, whose default temperature is 0 (`LOCAL_TEMPERATURE`): llama-cpp-python's server
otherwise samples at 0.8, and a small model then writes a different call, or none, from one run
to the next. The OpenAI-compatible backend (so also the local provider) and Ollama's send them;
the Anthropic and Responses backends send none, and OpenAI's reasoning models, which refuse
both, never get them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

TEMPERATURE_ENV = "ACP_SERVER_TEMPERATURE"
TOP_P_ENV = "ACP_SERVER_TOP_P"
LOCAL_TEMPERATURE = 0.0
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.0, 1.0)


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of one model; None: the server's default (nothing is sent)."""

    temperature: float | None = None
    top_p: float | None = None

    def fields(self) -> dict[str, float]:
        """The request body's fields for the settings that are set."""
        pairs = (("temperature", self.temperature), ("top_p", self.top_p))
        return {key: value for key, value in pairs if value is not None}


def chosen(configured: Sampling, env: Mapping[str, str], *, local: bool = False) -> Sampling:
    """The settings to send: the environment's, else the configuration file's, else (for the
    `local` provider only) temperature 0."""
    temperature = _number(env, TEMPERATURE_ENV, TEMPERATURE_RANGE)
    if temperature is None:
        temperature = configured.temperature
    if temperature is None and local:
        temperature = LOCAL_TEMPERATURE
    top_p = _number(env, TOP_P_ENV, TOP_P_RANGE)
    return Sampling(temperature, configured.top_p if top_p is None else top_p)


def _number(env: Mapping[str, str], name: str, bounds: tuple[float, float]) -> float | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not bounds[0] <= value <= bounds[1]:  # also NaN
        log.warning("ignoring %s=%r: give a number from %g to %g", name, text, *bounds)
        return None
    return value
