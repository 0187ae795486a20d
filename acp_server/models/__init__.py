"""The model catalogue, where a process's models come from, and carrying a conversation over."""
