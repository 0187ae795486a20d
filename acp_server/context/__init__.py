"""Context that never overflows: the window, token estimates, the pre-flight fit, compaction.

Pure and synchronous except `compact`, which awaits the one summary round it is given. The agent
loop uses it like this (see each module for the rules):

    budget = ContextBudget(Window(configured=..., discovered=...))      # one per session
    fit = budget.fit(system, tools, history)                            # before every request
    if fit.status == "too_large": tell the user fit.problem(); leave history alone
    if fit.status == "compact" and worth_compacting(budget, system, tools, history):
        result = await compact(budget, system, tools, history, summarize)
    budget.after_round(fit, usage.prompt_tokens)   # -> lowered window: warn once, compact next
    budget.after_overflow(stream_error.overflow, fit)  # an overflow error: compact, retry once
    clip_result(text, fit.room, budget.estimator, tool_name)        # an oversized tool result
    usage_update: used = reported prompt tokens or fit.used, size = fit.window
"""

from acp_server.context.compact import Compaction, compact, worth_compacting
from acp_server.context.fit import ContextBudget, Fit
from acp_server.context.profile import ToolProfile, ToolRoom, apply_profile, choose_profile
from acp_server.context.prune import prune_tool_outputs
from acp_server.context.state import KeptState, is_state_message, rebuild
from acp_server.context.summary import summary_request, transcript
from acp_server.context.summary_round import Summarize, SummaryCutOff, shrank
from acp_server.context.tokens import Estimator
from acp_server.context.truncate import clip_result, truncate
from acp_server.context.window import Window, truncated_to

__all__ = [
    "Compaction",
    "ContextBudget",
    "Estimator",
    "Fit",
    "KeptState",
    "Summarize",
    "SummaryCutOff",
    "ToolProfile",
    "ToolRoom",
    "Window",
    "apply_profile",
    "choose_profile",
    "clip_result",
    "compact",
    "is_state_message",
    "prune_tool_outputs",
    "rebuild",
    "shrank",
    "summary_request",
    "transcript",
    "truncate",
    "truncated_to",
    "worth_compacting",
]
