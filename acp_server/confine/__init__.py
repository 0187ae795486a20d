"""The sandbox that every process the agent starts in a project runs in, and its launchers.

Both the model's commands and the agent's own git run in it: its levels, the mechanisms that
keep them (bubblewrap, Landlock, seccomp), the hidden secrets and the allowed environment."""
