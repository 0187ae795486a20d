"""The search tools, grep and glob: ripgrep where it is, else Python, one set of ignore rules."""
