"""The OpenAI Responses dialect: its backend and its wire format."""
