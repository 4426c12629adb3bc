"""The MCP server object: sift's tools on the SDK's low-level ``Server``.

The low-level server is used (rather than the decorator-based ``MCPServer``) so the tool
list is exactly the hand-written schemas of ``sift.mcp.schema`` and every result,
including every error, is shaped by ``sift.mcp.tools``. Who a call runs as is decided
by ``principal_for``: a fixed principal over stdio, the bearer key's caller over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from sift import __version__
from sift.errors import SiftError
from sift.mcp.schema import TOOLS, input_schema
from sift.mcp.tools import SiftTools, error_result
from sift.principal import Principal

PrincipalFor = Callable[[ServerRequestContext[Any, Any]], Principal]

INSTRUCTIONS: Final = (
    "sift fetches web pages for you and returns clean, capped text. Use fetch for one page "
    "(read long pages on with the offset and digest its footer gives), and batch_submit, "
    "batch_status and batch_results for many URLs at once."
)


def build_server(tools: SiftTools, principal_for: PrincipalFor) -> Server[Any]:
    """A server listing ``TOOLS`` and running each call through ``tools`` as the caller
    ``principal_for`` names (an ``Unauthorized`` it raises becomes a tool error)."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            principal = principal_for(ctx)
        except SiftError as exc:
            return error_result(exc)
        return await tools.call(principal, params.name, params.arguments)

    return Server(
        "sift",
        version=__version__,
        title="sift",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
