"""A 2025-11-25 client built with the official Python SDK: runs tern's demo
over stdio, initializes, lists the tools, and calls provision_database,
answering the live elicitation/create; then a prompt-less tool error path.
Usage: legacy_client.py TERN_EXECUTABLE. Exit status 0 when every check held."""
import asyncio
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

asked = []


async def elicit(context, params):
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"region": "eu-west-1"})


async def main():
    server = StdioServerParameters(command=sys.argv[1], args=["serve", "demo", "--stdio"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            init = await session.initialize()
            assert init.protocolVersion == "2025-11-25", init.protocolVersion
            assert init.serverInfo.name, init
            await session.send_ping()
            names = [t.name for t in (await session.list_tools()).tools]
            assert "provision_database" in names, names
            result = await session.call_tool("provision_database", {"name": "orders"})
            text = result.content[0].text
            print(f"provision_database: {text}")
            assert not result.isError, result
            assert "eu-west-1" in text, text
            assert len(asked) == 1 and "orders" in asked[0], asked
            await session.set_logging_level("info")
    print("python client: ok")


asyncio.run(main())
