"""What the model is told about where it works: the project's instruction files (`instructions`)
and the environment (`environment`: date, OS, roots, git), put together per turn by `Workspace`
(`workspace`) for the session's system prompt."""
