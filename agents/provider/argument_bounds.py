"""Tool-call arguments a local server cannot write without end (the output reserve, C1).

llama-cpp-python's `chatml-function-calling` format writes the arguments of a tool the
model chose under a grammar built from the tool's JSON schema, with `max_tokens` unset,
and after each call lets the model choose another call, again unbounded. A small model
looping inside a string argument (the template's HTML escaping compounding: `&#34;` →
`&amp;#34;` …) or calling the same tool again and again held a single-slot server until
its window was full: minutes on a CPU, and the tokenizer waited behind it. Closing the
connection does not stop it: its server looks for a closed connection only between the
chunks of a streamed answer, and it streams no tool call the model chose ("Automatic
streaming tool choice is not supported"); a whole answer runs in a thread to its end.

What does stop it is the grammar itself, which that server builds from the schemas it is
sent. On a local server every string argument gets a `maxLength`, every array a
`maxItems` and a free-form object no keys, sized so that one call's arguments fit about
the output reserve: the grammar then closes the arguments. The stop sequences
`functions.NAME:` end the reply after its first call (the server's next-call step stops at
once and finds no tool name). A string that reached its bound was cut there, not finished:
the reply is refused as an answer cut at the reserve (`output_overflow`), never run as if
it were whole (a file written half would be worse than none).

Other servers read `maxLength` as an ordinary schema keyword (guided decoding honours it)
and never meet the stop sequences.
"""
from __future__ import annotations

import json
from typing import Any

# Characters a bounded argument may take per token of the output reserve: JSON string
# text runs 3 to 4 characters a token in the tokenizers of small local models.
CHARS_PER_TOKEN = 3
MIN_CHARS = 64  # a path or an id always fits
# llama.cpp's grammar parser refuses a string bounded past about 1000 characters (its
# converter nests one optional group per character; "exceeds sane defaults") and
# llama-cpp-python's server then dies: an 8k window's reserve (1000 tokens) asked for
# 3000. Measured on llama-cpp-python 0.3.36: 1000 parses, 1010 does not.
MAX_CHARS = 900
MAX_ITEMS = 16
# String schemas bounded already, or by their own form.
SELF_BOUNDED = ("enum", "const", "pattern", "format", "maxLength")


def bound_schemas(schemas: list[dict[str, Any]], reserve_tokens: int) -> list[dict[str, Any]]:
    """Copies of OpenAI tool `schemas` whose arguments are bounded to about
    `reserve_tokens` tokens per call (see the module's note)."""
    chars = min(MAX_CHARS, max(MIN_CHARS, reserve_tokens * CHARS_PER_TOKEN))
    # Through JSON, not deepcopy: tools share schema objects (a task id's), and each
    # tool's copy gets its own share of the reserve.
    bounded = json.loads(json.dumps(schemas))
    for schema in bounded:
        function = schema.get("function") or {}
        if isinstance(function.get("parameters"), dict):
            function["parameters"] = _bound(function["parameters"], chars)
    return bounded


def _bound(schema: dict[str, Any], chars: int) -> dict[str, Any]:
    kind = schema.get("type")
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            schema[union] = [_bound(s, chars) if isinstance(s, dict) else s
                             for s in schema[union]]
    if kind == "string":
        if not any(key in schema for key in SELF_BOUNDED):
            schema["maxLength"] = chars
    elif kind == "array":  # as many items as the share holds at MIN_CHARS each
        items = min(int(schema.get("maxItems", MAX_ITEMS)), MAX_ITEMS,
                    max(1, chars // MIN_CHARS))
        schema["maxItems"] = items
        if isinstance(schema.get("items"), dict):
            schema["items"] = _bound(schema["items"], max(MIN_CHARS, chars // max(1, items)))
    elif kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        if not properties:
            # Free-form: the grammar would allow any number of keys and values, nested.
            schema["properties"] = {}
            schema["additionalProperties"] = False
            return schema
        roomy = [name for name, sub in properties.items() if _takes_room(sub)]
        share = max(MIN_CHARS, chars // max(1, len(roomy)))
        schema["properties"] = {name: _bound(sub, share) if isinstance(sub, dict) else sub
                                for name, sub in properties.items()}
    return schema


def _takes_room(schema: Any) -> bool:
    """Whether a property's value can be long (a number or a boolean cannot)."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "string":
        return not any(key in schema for key in SELF_BOUNDED if key != "maxLength")
    return kind in ("array", "object", None)


def call_stops(schemas: list[dict[str, Any]]) -> list[str]:
    """The stop sequences that end a reply after its first tool call on
    chatml-function-calling (they are what the model writes to start another call)."""
    return [f"functions.{s['function']['name']}:" for s in schemas
            if (s.get("function") or {}).get("name")]


def argument_at_bound(schemas: list[dict[str, Any]], name: str,
                      arguments: str) -> tuple[str, int] | None:
    """(path, maxLength) of a string in the `arguments` of a call to tool `name` that
    reached the `maxLength` its schema gave it (cut by the grammar), else None."""
    schema = next(((s.get("function") or {}).get("parameters") for s in schemas
                   if (s.get("function") or {}).get("name") == name), None)
    if not isinstance(schema, dict):
        return None
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return None
    return _at_bound(schema, value, "")


def _at_bound(schema: dict[str, Any], value: Any, path: str) -> tuple[str, int] | None:
    if isinstance(value, str):
        limit = schema.get("maxLength")
        if isinstance(limit, int) and len(value) >= limit:
            return path or "(the argument)", limit
        return None
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            sub = properties.get(key)
            found = _at_bound(sub, item, f"{path}.{key}" if path else key) \
                if isinstance(sub, dict) else None
            if found:
                return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found = _at_bound(schema["items"], item, f"{path}[{i}]")
            if found:
                return found
    return None
