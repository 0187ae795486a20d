"""The durable session store (SQLite) and the transcript a session records into it."""
