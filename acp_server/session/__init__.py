"""A session and the sessions of a connection: queue, history, model choice, commands, restore."""
