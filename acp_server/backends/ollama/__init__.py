"""Ollama's native dialect: its backend, its wire format and its prompt-cache counts."""
