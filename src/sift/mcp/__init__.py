"""sift as an MCP server: the same core, reached through the Model Context Protocol.

- ``schema`` (``fetch_schema``, ``job_schema``): the tools' names, descriptions and JSON
  schemas.
- ``tools``: argument checks, calls into ``Service`` / ``BatchJobs``, result shapes.
- ``server``: the SDK's low-level ``Server`` over those tools.
- ``http``: ``/mcp`` on ``sift serve`` (streamable HTTP, bearer keys; 403 for a bad key).
- ``stdio``: ``sift mcp`` over standard input/output; ``handover``: its jobs finished after
  the client has gone; ``refusal``: why it cannot start, told to the client.

See docs/mcp.md.
"""
