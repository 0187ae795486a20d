"""Subagents: the task tool's jobs run as child sessions, and how an editor is shown them."""
