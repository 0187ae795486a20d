"""The command tools: run_command (foreground or background), its jobs, their process groups."""
