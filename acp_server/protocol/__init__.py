"""ACP v1 over the wire: the method handlers, lifecycle, params, content, auth, the editor."""
