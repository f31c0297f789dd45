"""Tools from MCP servers (feature T10): sources, their connections, and the tools the
model is offered from them beside the built-ins."""
from agents.toolsources.spec import SourceConfigError, SourceSpec, ToolSettings

__all__ = ["SourceConfigError", "SourceSpec", "ToolSettings"]
