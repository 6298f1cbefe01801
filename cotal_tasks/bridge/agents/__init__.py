"""A seat's tools for coding agents, and the MCP server that offers them."""
