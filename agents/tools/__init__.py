"""The agent's tools (features C10, C11, T2–T6) and the registry that runs them.

`registry.ToolRegistry.run` is the only way the loop runs a tool and it never raises;
`base` is the contract every tool follows; `bounding`, `render` and `offload` keep a
result within its boundary with the raw text in the archive.
"""
from agents.tools.base import (Pending, Tool, ToolBoundary, ToolContext, ToolError, ToolOutcome,
                               ToolReply)
from agents.tools.delegate import DelegationLimits, DelegationPlan, delegate_tool
from agents.tools.registry import ToolRegistry, default_registry

__all__ = ["DelegationLimits", "DelegationPlan", "Pending", "Tool", "ToolBoundary", "ToolContext",
           "ToolError", "ToolOutcome", "ToolRegistry", "ToolReply", "default_registry",
           "delegate_tool"]
