"""A 2025-11-25 client on the official Python SDK (mcp==1.30.0, the venv
scripts/peers makes under .cache/interop/venv): connects over Streamable
HTTP to URL, lists the tools, and calls TOOL with {"name": "orders"},
answering each live elicitation/create with {"region": "eu-west-1"}.
Prints one JSON line: the negotiated version, the tool names, the result's
text and the questions asked.
Usage: py130_client.py URL TOOL"""
import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

asked = []


async def elicit(context, params):
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"region": "eu-west-1"})


async def main():
    url, tool = sys.argv[1], sys.argv[2]
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            init = await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            result = await session.call_tool(tool, {"name": "orders"})
            print(json.dumps({
                "version": init.protocolVersion,
                "server": init.serverInfo.name,
                "tools": tools,
                "text": result.content[0].text if result.content else None,
                "isError": result.isError,
                "asked": asked,
            }))


asyncio.run(main())
