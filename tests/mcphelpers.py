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


def error_of(result: types.CallToolResult) -> dict[str, str]:
    """The error object of a tool error: in ``_meta``, never as structured content (which
    a client checks against the tool's outputSchema)."""
    assert result.is_error is True
    assert result.structured_content is None
    assert result.meta is not None
    err: dict[str, str] = result.meta["sift/error"]
    assert texts(result) == [f"{err['code']}: {err['message']}\nhint: {err['hint']}"]
    return err
