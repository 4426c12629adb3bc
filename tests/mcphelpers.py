"""Calling sift's MCP tools from the SDK's client session, for both transports' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def mcp_http_session(base_url: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on ``<base_url>/mcp`` with a bearer key."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


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
