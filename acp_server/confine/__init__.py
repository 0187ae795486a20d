"""Confinement: the sandbox every process the agent starts in a project runs in (the model's
commands, and the agent's own git), its levels, mechanisms and launchers."""
