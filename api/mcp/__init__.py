"""The agent tools over the Model Context Protocol: Streamable HTTP at /mcp, and stdio.

Every tool call runs the same use case as `POST /tools/{name}` (api/tool_calls.py), with the
caller's token, so identity, policy, budgets, audit and access records are exactly those of
the HTTP tools; it never goes through the HTTP app.
"""

from api.mcp.http import mount_mcp
from api.mcp.stdio import run_stdio

__all__ = ["mount_mcp", "run_stdio"]
