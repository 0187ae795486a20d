"""acp-server: a coding agent served over the Agent Client Protocol (ACP v1) on stdio."""

__version__ = "0.1.0"
