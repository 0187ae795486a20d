"""The Anthropic Messages dialect: its backend and its wire format."""
