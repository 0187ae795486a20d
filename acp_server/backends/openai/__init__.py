"""The OpenAI chat-completions dialect: its backend and its wire format."""
