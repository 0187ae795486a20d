"""What the model is told about where it works: instruction files and the environment.

The project's instruction files (`instructions`) and the environment (`environment`: date, OS,
roots, git), put together per turn by `Workspace` (`workspace`) for the session's system prompt."""
