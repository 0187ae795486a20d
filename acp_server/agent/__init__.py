"""One prompt turn: the loop that asks the model and runs tools, and the turn's context."""
