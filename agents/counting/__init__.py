"""Counting tokens and money: tiktoken, a server's own tokenizer, the calibration that
corrects the engine's figures by the provider's, and price tables.

`tokens` is the only module of the engine that imports tiktoken. What is specific to
llama-cpp-python (the prompt its server renders, counted exactly) lives in `llama_cpp`.
"""
from agents.counting.calibration import TokenCalibration
from agents.counting.pricing import PRICE_TABLES, CostMeter, PriceTable
from agents.counting.server_tokens import ServerTokenCounter, make_counter
from agents.counting.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TextCache, TokenCounter

__all__ = ["PRICE_TABLES", "REPLY_PRIMING", "TOKENS_PER_MESSAGE", "CostMeter", "PriceTable",
           "ServerTokenCounter", "TextCache", "TokenCalibration", "TokenCounter", "make_counter"]
