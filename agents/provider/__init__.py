"""The model provider: one chat-completion call through the `openai` SDK, and its errors.

`client` is the only module of the engine that imports `openai`; `overflow` reads each
server's "your request is longer than my window" message.
"""
from agents.provider.client import (ContextOverflow, ModelClient, ModelError, ModelReply,
                                    OutputOverflow)

__all__ = ["ContextOverflow", "ModelClient", "ModelError", "ModelReply", "OutputOverflow"]
