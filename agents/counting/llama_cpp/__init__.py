"""Exact counting on llama-cpp-python's server: the prompt its chat template renders from a
request (`served_prompt`), counted whole by its tokenizer and checked against every reply
(`prompt_count`). Nothing here is needed by any other provider.
"""
from agents.counting.llama_cpp.prompt_count import PromptCount, ServedPromptCounter, read_back

__all__ = ["PromptCount", "ServedPromptCounter", "read_back"]
