"""Tool calls a model wrote as text, recovered as real calls, and models offered no tools."""
