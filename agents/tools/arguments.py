"""Parse and check the arguments a model sent for a tool call.

Models send malformed JSON, miss required fields, pass "10" for 10, or invent arguments;
each becomes a ToolError whose message says what to send instead.
"""
from __future__ import annotations

import inspect
import json
from typing import Any

from agents.storable import storable_value
from agents.tools.base import Tool, ToolError

# Parameters the registry fills in itself; the model never sees or sets them (feature T2).
HIDDEN_PARAMETERS = ("_ctx", "_state", "_boundary")
MAX_ARGUMENTS_CHARS = 5_000_000

_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "true or false", "array": "a list", "object": "an object"}


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _coerce(tool: str, name: str, value: Any, spec: dict[str, Any]) -> Any:
    expected = spec.get("type")
    if "enum" in spec and value not in spec["enum"]:
        choices = ", ".join(json.dumps(c) for c in spec["enum"])
        raise ToolError(f"Argument '{name}' of {tool} must be one of {choices} "
                        f"(got {_shown(value)}).")
    if isinstance(expected, list) or expected is None:
        return value
    if expected == "integer":
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected == "number":
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif expected == "string":
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # task ids: the model often sends 1 for "1"
        ok = isinstance(value, str)
    elif expected == "boolean":
        ok = isinstance(value, bool)
    elif expected == "array":
        ok = isinstance(value, list)
    elif expected == "object":
        ok = isinstance(value, dict)
    else:
        ok = True
    if not ok:
        raise ToolError(f"Argument '{name}' of {tool} must be {_TYPE_NAMES.get(expected, expected)}"
                        f" (got {_shown(value)}).")
    return value


def parse_arguments(tool: Tool, arguments_json: str | dict[str, Any] | None) -> dict[str, Any]:
    """The checked keyword arguments for `tool`, or a ToolError saying what is wrong."""
    if isinstance(arguments_json, dict):  # already decoded (e.g. a scenario step)
        arguments_json = json.dumps(arguments_json)
    text = (arguments_json or "").strip()
    if len(text) > MAX_ARGUMENTS_CHARS:
        raise ToolError(f"The arguments for {tool.name} are {len(text)} characters long; "
                        f"the limit is {MAX_ARGUMENTS_CHARS}.")
    try:
        args = json.loads(text) if text else {}
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise ToolError(f"The arguments for {tool.name} are not valid JSON ({detail}). "
                        f"Send one JSON object, e.g. {example_arguments(tool)}.") from None
    # An escaped NUL or lone surrogate ("\\u0000") decodes to text no database stores: the
    # tool gets, and the archive keeps, the storable rule's marks (agents/storable.py).
    args = storable_value(args)
    if not isinstance(args, dict):
        raise ToolError(f"The arguments for {tool.name} must be a JSON object, not "
                        f"{type(args).__name__}; e.g. {example_arguments(tool)}.")
    visible = tool.schema()["function"]["parameters"]
    properties = visible.get("properties", {})
    unknown = [k for k in args if k not in properties]
    if unknown:
        takes = ", ".join(properties) or "no arguments"
        raise ToolError(f"Unknown argument {', '.join(repr(k) for k in unknown)} for "
                        f"{tool.name}; it takes: {takes}.")
    missing = [k for k in visible.get("required", []) if k not in args]
    if missing:
        raise ToolError(f"Missing required argument {', '.join(repr(k) for k in missing)} "
                        f"for {tool.name}; e.g. {example_arguments(tool)}.")
    return {name: _coerce(tool.name, name, value, properties[name]) for name, value in args.items()}


def example_arguments(tool: Tool) -> str:
    """A JSON object with the required arguments, to show in error messages."""
    params = tool.schema()["function"]["parameters"]
    sample_values = {"string": "...", "integer": 1, "number": 1.0, "boolean": True,
                    "array": [], "object": {}}
    example = {name: sample_values.get(params["properties"][name].get("type"), "...")
               for name in params.get("required", [])}
    return json.dumps(example, ensure_ascii=False)


def hidden_parameters(tool: Tool) -> tuple[str, ...]:
    """Which hidden parameters the tool function declares; checks its visible ones exist."""
    signature = inspect.signature(tool.func)
    params = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    visible = tool.schema()["function"]["parameters"]["properties"]
    absent = [name for name in visible if name not in params and not takes_any]
    if absent:
        raise ValueError(f"Tool {tool.name}: schema arguments {absent} are not parameters "
                         f"of {tool.func.__name__}.")
    return tuple(name for name in HIDDEN_PARAMETERS if name in params)
