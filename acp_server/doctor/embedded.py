"""The doctor's check of the `local` provider: a model file the agent runs itself, started at the
first prompt (`backends/local/`). There is no server to ask before then, so what is checked
is what starting it needs: llama-cpp-python's server, and the model file; and its window is the
one the agent will give it (ACP_SERVER_LOCAL_CONTEXT), as a session would learn it. `capped`, the
cap ACP_SERVER_CONTEXT_WINDOW puts on any model's window, is here so `remote` can use it too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acp_server.doctor import Check, fail, ok
from acp_server.models.catalogue import ModelEntry
from acp_server.settings import CONTEXT_WINDOW_ENV


def local_checks(entries: Sequence[ModelEntry], env: Mapping[str, str]) -> list[Check]:
    """One line per `local:` model named: it can start here, and its window; or what to do."""
    from acp_server.backends.local import backend as local

    checks: list[Check] = []
    for entry in entries:
        problem = local.missing(entry.model)
        if problem is not None:
            checks.append(fail(f"Model {entry.value}: cannot run on this machine", problem))
            continue
        given = env.get(local.CONTEXT_ENV, "").strip()
        source = f"as {local.CONTEXT_ENV} sets it" if given else "the embedded model's default"
        window, source = capped(local.n_ctx(env), source, env)
        checks.append(
            ok(
                f"Model {entry.value}: {local.model_file(entry.model).name} runs on this "
                f"machine, started at the first prompt; context window {window:,} tokens, "
                f"{source}"
            )
        )
    return checks


def capped(window: int | None, source: str, env: Mapping[str, str]) -> tuple[int | None, str]:
    """ACP_SERVER_CONTEXT_WINDOW caps the window wherever it came from (the smaller wins)."""
    text = env.get(CONTEXT_WINDOW_ENV, "").strip()
    cap = int(text) if text.isdigit() and int(text) > 0 else None
    if cap is None or (window is not None and window <= cap):
        return window, source
    was = f" ({window:,} {source})" if window is not None else ""
    return cap, f"as {CONTEXT_WINDOW_ENV} sets it{was}"
