"""Choosing a model: the providers, what is known of hosted models, what local servers have."""
