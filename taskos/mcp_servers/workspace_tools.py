"""An example MCP server over the session's workspace: arithmetic and two small file tools.

    python -m taskos.mcp_servers.workspace_tools          (stdio; what a tool source runs)
    python -m taskos.mcp_servers.workspace_tools --http 8765   (Streamable HTTP at /mcp)

Started by the worker as a stdio tool source, its working folder is the session's
workspace; its file tools read only files inside that folder.
"""
from __future__ import annotations

import argparse
import ast
import csv
import math
import operator
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("taskos-workspace-tools",
                   instructions="Arithmetic and small reads over the task's workspace.")

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
              ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS = {"sqrt": math.sqrt, "round": round, "abs": abs, "min": min, "max": max}
MAX_POWER = 1000


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER:
            raise ValueError(f"exponent {right} is over {MAX_POWER}")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS and not node.keywords):
        return _FUNCTIONS[node.func.id](*(_evaluate(arg) for arg in node.args))
    raise ValueError(f"not allowed in an expression: {ast.dump(node)[:80]}")


@server.tool()
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression: + - * / // % **, parentheses, and sqrt, round,
    abs, min, max. Example: (1520.5 - 1210) / 1210 * 100"""
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
        raise ValueError(f"cannot evaluate {expression!r}: {exc}") from None
    return f"{value:.10g}" if isinstance(value, float) else str(value)


def _workspace_file(path: str) -> Path:
    root = Path.cwd().resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        raise ValueError(f"{path!r} is not a file in the workspace")
    return target


@server.tool()
def column_total(path: str, column: str) -> str:
    """Sum and count the numeric values of one column of a CSV file in the workspace;
    empty and non-numeric cells are counted apart."""
    total, numbers, skipped = 0.0, 0, 0
    with _workspace_file(path).open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.DictReader(handle)
        if column not in (reader.fieldnames or []):
            raise ValueError(f"{path} has no column {column!r}; its columns: "
                             f"{', '.join(reader.fieldnames or [])}")
        for row in reader:
            try:
                total += float(row[column])
                numbers += 1
            except (TypeError, ValueError):
                skipped += 1
    return f"{column}: total {total:.10g} over {numbers} rows ({skipped} empty or not numbers)"


@server.tool()
def count_words(path: str) -> str:
    """Lines, words and characters of a text file in the workspace."""
    text = _workspace_file(path).read_text(encoding="utf-8", errors="replace")
    return f"{path}: {len(text.splitlines())} lines, {len(text.split())} words, {len(text)} characters"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, default=0, help="serve Streamable HTTP on this port")
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
