"""The agent tools over the Model Context Protocol: Streamable HTTP at /mcp, and stdio.

Every tool call is answered by the app's own `POST /tools/{name}`, with the caller's token, so
identity, policy, budgets, audit and access records are exactly those of the HTTP tools.
"""

from api.mcp.http import mount_mcp
from api.mcp.stdio import run_stdio

__all__ = ["mount_mcp", "run_stdio"]
