"""`acp-server run`: a headless ACP client that starts a real server and prints its turn."""
