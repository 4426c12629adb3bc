"""Calling sift's MCP tools from the SDK's client session, for both transports' tests."""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp import ClientSession


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, args)
    assert isinstance(result, types.CallToolResult)
    return result


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]
