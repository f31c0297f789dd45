"""MCP servers that ship with TaskOS, as examples of tool sources (feature T10). They use
the `mcp` SDK only: no Django, no engine."""
