"""The simulated model: a strict OpenAI-compatible provider, in process, for the `openai` SDK.

It plays scenario scripts, counts and caches what it receives with its own code, and
answers summary and probe requests from the messages it is sent. It imports nothing of
the engine: only the agreed strings (agents/protocol.py) and the scenarios it plays.
"""
from agents.sim.transport import SimTransport, sim_http_client

__all__ = ["SimTransport", "sim_http_client"]
