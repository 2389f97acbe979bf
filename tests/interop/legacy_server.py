"""A 2025-11-25 server built with the official Python SDK (FastMCP), asking
with ctx.elicit: the peer `tern call` is tested against."""
from pydantic import BaseModel

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("python-legacy")


class Region(BaseModel):
    region: str


@mcp.tool()
async def provision_database(name: str, ctx: Context) -> str:
    """Creates a database, asking where it should live."""
    answer = await ctx.elicit(f"Which region should {name} live in?", schema=Region)
    if answer.action != "accept":
        return "Provisioning cancelled."
    return f"Created {name} in {answer.data.region}"


class Size(BaseModel):
    nodes: int


@mcp.tool()
async def provision_cluster(name: str, ctx: Context) -> str:
    """Creates a cluster, asking two questions in turn (where, then how big)."""
    where = await ctx.elicit(f"Which region should {name} run in?", schema=Region)
    if where.action != "accept":
        return "Provisioning cancelled."
    size = await ctx.elicit(f"How many nodes should {name} have?", schema=Size)
    if size.action != "accept":
        return "Provisioning cancelled."
    return f"Created {name} in {where.data.region} with {size.data.nodes} nodes"


@mcp.tool()
def describe() -> str:
    """Says what this server is (a tool that asks nothing)."""
    return "python-legacy: provisions databases"


if __name__ == "__main__":
    mcp.run()
