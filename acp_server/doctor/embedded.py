"""The doctor's check of the `local` provider: a model file the agent runs itself, started at the
first prompt (`backends/local.py`). There is no server to ask before then, so what is checked
is what starting it needs: llama-cpp-python's server, and the model file; and its window is the
one the agent will give it (ACP_SERVER_LOCAL_CONTEXT), as a session would learn it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acp_server.doctor import Check, fail, ok
from acp_server.models.catalogue import ModelEntry


def local_checks(entries: Sequence[ModelEntry], env: Mapping[str, str]) -> list[Check]:
    """One line per `local:` model named: it can start here, and its window; or what to do."""
    from acp_server.backends import local
    from acp_server.doctor.remote import capped

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
