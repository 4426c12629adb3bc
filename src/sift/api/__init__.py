"""The /v1 HTTP API: routes and their schemas, auth, the error envelope, the listener (the
app that mounts it with the console and MCP is ``sift.server``)."""
