"""On llama-cpp-python's own server, a tool-call argument that never ends is closed by the
grammar the server builds from the bounded schema (agents.provider.argument_bounds), not
run to the end of the window while the single slot is held.

The model is made to loop for certain: every token holding a double quote is biased
-100, so nothing but the grammar can end the string (a looping small model, for the
server, is the same). Unbounded, the same request writes until the window is full."""
from __future__ import annotations

import json

import httpx2
import pytest

from agents.provider.argument_bounds import (CHARS_PER_TOKEN, argument_at_bound,
                                             bound_schemas, call_stops)
from taskos.ops.localmodel import find_gguf

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1200)]
RESERVE = 32  # tokens: the bound is 96 characters, a minute or two on a busy CPU
TOOLS = [{"type": "function", "function": {
    "name": "list_files", "description": "List the files in a folder.",
    "parameters": {"type": "object", "properties": {"path": {
        "type": "string", "description": "Folder to list."}}, "required": ["path"]}}}]


def quote_tokens() -> dict[str, float]:
    import llama_cpp

    vocab = llama_cpp.Llama(str(find_gguf()), vocab_only=True, verbose=False)
    return {str(i): -100.0 for i in range(vocab.n_vocab()) if b'"' in vocab.detokenize([i])}


def test_a_string_argument_that_never_ends_is_closed_at_its_bound(local_server):
    bounded = bound_schemas(TOOLS, RESERVE)
    body = {"model": "local", "temperature": 0, "max_tokens": RESERVE, "tools": bounded,
            "tool_choice": "auto", "stop": call_stops(bounded),
            "logit_bias": quote_tokens(), "logit_bias_type": "input_ids",
            "messages": [
                {"role": "system", "content": "You are a helpful assistant that calls tools."},
                {"role": "user", "content": "List the files in the data folder."},
                {"role": "assistant", "content": "", "tool_calls": [{
                    "id": "c1", "type": "function", "function": {
                        "name": "list_files", "arguments": json.dumps({"path": "data/" * 60})}}]},
                {"role": "user", "content": "Error: no such folder. Call list_files again "
                                            "with the same path."}]}
    response = httpx2.post(f"{local_server}/chat/completions", json=body, timeout=1100)
    assert response.status_code == 200, response.text[:500]  # not "exceed context window"
    answer = response.json()
    [call] = answer["choices"][0]["message"]["tool_calls"]
    limit = RESERVE * CHARS_PER_TOKEN
    assert argument_at_bound(bounded, call["function"]["name"],
                             call["function"]["arguments"]) == ("path", limit), call
    # The slot was held for about the bound's tokens, not for the window's.
    assert answer["usage"]["completion_tokens"] <= limit, answer["usage"]
