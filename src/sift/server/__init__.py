"""The HTTP server's one ASGI app: the ``/v1`` API, the web console and MCP over HTTP,
composed by ``server.app.create_app`` over the parts the assembly builds.

It sits above ``api/``, ``console/`` and ``mcp/``: the console and MCP reuse the API's
auth, error envelope and observation, so the room that mounts all three cannot live in
``api/`` itself without a loop. Nothing here runs at import time.
"""
