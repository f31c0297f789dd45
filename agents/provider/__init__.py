"""The model provider: one chat-completion call through the `openai` SDK, and its errors.

`client` is the only module of the engine that imports `openai`; `overflow` reads each
server's "your request is longer than my window" message; `hosts` says which hosts a
profile's URL may name.
"""
from agents.provider.client import (ContextOverflow, ModelClient, ModelError, ModelReply,
                                    OutputOverflow, mark_carriers, wire_with_marks)
from agents.provider.hosts import DEFAULT_HOSTS, HostUnresolved, UrlRefused, check_model_url

__all__ = ["ContextOverflow", "ModelClient", "ModelError", "ModelReply", "OutputOverflow",
           "DEFAULT_HOSTS", "HostUnresolved", "UrlRefused", "check_model_url",
           "wire_with_marks", "mark_carriers"]
