"""MCP servers as tools: their configuration, connection, processes, questions and tool budget."""
