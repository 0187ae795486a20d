"""`python -m acp_server` is the same as the `acp-server` console script."""

from acp_server.cli import main

raise SystemExit(main())
