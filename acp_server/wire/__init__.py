"""The JSON-RPC 2.0 peer over newline-delimited JSON on stdio: knows nothing about ACP."""
