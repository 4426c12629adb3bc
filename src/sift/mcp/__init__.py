"""sift as an MCP server: the same core, reached through the Model Context Protocol.

- ``schema``: the four tools' names, descriptions and JSON schemas.
- ``tools``: argument checks, calls into ``Service`` / ``BatchJobs``, result shapes.
- ``server``: the SDK's low-level ``Server`` over those tools.
- ``http``: ``/mcp`` on ``sift serve`` (streamable HTTP, bearer keys).
- ``stdio``, ``command``: ``sift mcp`` over standard input/output.

See docs/mcp.md.
"""
