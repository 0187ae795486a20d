"""What a turn says in words of its own: the results of tool calls that were not run, the mark
kept on a reply cut off by the output limit, and what the user is told about such replies."""

CANCELLED_RESULT = "The user cancelled this tool call before it finished."
CUT_OFF_RESULT = (
    "Not run: this tool call was cut off by the output token limit before it was complete. "
    "Make the call again with less in it (for a large file, write it in parts)."
)
# Kept after a reply cut off by the output limit, so the model knows it did not finish it.
CUT_OFF_MARK = "\n\n[This reply was cut off here by the output token limit.]"
CUT_OFF_TEXT = (
    "The reply was cut off: the model reached its output token limit before it finished. "
    'Say "continue" to let it go on{advice}.'
)
CUT_OFF_CALL = (
    "The model's call to {name} was cut off by its output token limit before it was "
    "complete, so it was not run. Ask it to continue in smaller steps{advice}."
)
# The limit was the agent's (`max_tokens`: the reply reserve of a small window) ...
OUR_LIMIT = (
    ", or raise the limit of {limit:,} tokens (ACP_SERVER_REPLY_RESERVE, or the model's "
    "reply_reserve in the configuration file)"
)
# ... or the model server's own.
SERVER_LIMIT = " (the limit is the model server's own)"
EMPTY_REPLY = (
    "The model sent an empty reply (no text and no tool call). Nothing was added to the "
    "conversation; try again, or rephrase the request."
)
# The last round of a turn at its request limit: appended to that request's system prompt.
LAST_ROUND_NOTE = (
    "This turn has used all {n} model requests it may make. Do not call any tool now: "
    "in a few sentences, tell the user what you did, where you stopped and what is left to do."
)
LIMIT_RESULT = "Not run: the turn had reached its limit of model requests."
LIMIT_TEXT = (
    "The turn stopped after {n} model requests, its limit (--max-turn-requests). Send a "
    "message to let the agent go on."
)
THOUGHT_ONLY = (
    "The model ran out of output tokens while it was still thinking, before it wrote an "
    "answer. Try again, or raise the model's output token limit."
)
