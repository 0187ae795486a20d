"""Choosing a model: the backend `--model` or the configuration names, what local servers have."""
