"""Slash commands: the table of commands the agent handles itself, and how a session runs one."""
