"""A server on the official Python SDK (mcp 2.x) with a tool that asks.

`tern audit` runs against it in scripts/audit: over stdio
(`python python_server.py`) and over Streamable HTTP
(`python python_server.py --http PORT`).
"""

import sys
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve


class Region(BaseModel):
    """Where the database lives."""

    region: str


def ask_region(name: str) -> Elicit[Region]:
    return Elicit(f"Which region should {name} live in?", Region)


mcp = MCPServer("audit-fixture")


@mcp.tool()
def provision_database(name: str, region: Annotated[Region, Resolve(ask_region)]) -> str:
    """Creates a database after asking which region it should live in."""
    return f"Created {name} in {region.region}."


def ask_city(restaurant: str) -> Elicit[Region]:
    return Elicit(f"In which city is {restaurant}?", Region)


@mcp.tool()
def book_table(restaurant: str, region: Annotated[Region, Resolve(ask_city)]) -> str:
    """Books a table (asks too, so state can be moved between tools)."""
    return f"Booked {restaurant} in {region.region}."


@mcp.resource("fixture://readme")
def readme() -> str:
    """A resource to move state onto."""
    return "audit fixture"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True, json_response=True)
    else:
        mcp.run()
