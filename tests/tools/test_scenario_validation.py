"""Scenario files are validated with errors naming the file, the path and what was expected
(issue 9 F13)."""
from __future__ import annotations

import json

import pytest

from agents.scenarios import ScenarioError, list_scenarios, load_scenario, parse_scenario


def scenario(**overrides):
    data = {"name": "t", "goal": "g", "steps": [{"tool": "list_files", "args": {}},
                                                {"final": "done"}]}
    data.update(overrides)
    return data


def nested(depth: int):
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("data, message", [
    (scenario(expect=[1]), 'expect: expected an object such as {"tier1": ["..."]}, got a list'),
    (scenario(expect={"tier1": "abc"}), "expect.tier1: expected a list of strings, got a string"),
    (scenario(expect={"tier1": [1]}), "expect.tier1: expected a list of strings, got a list"),
    (scenario(steps=[{"final": "early"}, {"tool": "list_files"}, {"final": "late"}]),
     "steps[0]: a 'final' answer must be the last step; 2 step(s) after it would never run"),
    (scenario(steps=[{"final": "x"}, {"user": "never delivered"}]),
     "steps[0]: a 'final' answer must be the last step; 1 step(s) after it would never run"),
    (scenario(steps=[{"tool": "list_files", "args": [1]}, {"final": "x"}]),
     "steps[0].args: expected an object, got a list"),
    (scenario(steps=[{"tool": "list_files", "arg": {}}, {"final": "x"}]),
     "steps[0]: unknown key 'arg' in a 'tool' step (allowed: 'args', 'from', 'repeat', 'say', 'tool')"),
    (scenario(steps=[{"tool": "a", "final": "x"}]),
     "steps[0]: expected exactly one of 'user', 'tool', 'tools', 'final', got 'tool', 'final'"),
    (scenario(steps=[{"tools": [{"tool": 3}]}, {"final": "x"}]),
     "steps[0].tools[0].tool: expected a string, got an integer"),
    (scenario(steps=[{"final": ["x"]}]), "steps[0].final: expected a string, got a list"),
    (scenario(window="big"), "window: expected a whole number of at least 1000 tokens and at "
                             "most 100000000 tokens, got 'big'"),
    (scenario(window=True), "window: expected a whole number of at least 1000 tokens and at "
                            "most 100000000 tokens, got True"),
    (scenario(goal={"text": "g"}), "goal: expected a string, got an object"),
    (scenario(stpes=[]), "stpes: unknown key"),
    (scenario(steps=[{"tool": "x", "args": nested(30)}, {"final": "x"}]),
     "steps[0].args: expected at most 20 levels of nesting in tool arguments"),
    (scenario(steps=[{"user": "u"}]), "steps: expected a 'final' answer as the last step"),
])
def test_a_malformed_scenario_gets_a_clear_error(data, message):
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data, origin="my.json")
    assert str(error.value).startswith("my.json: ")
    assert message in str(error.value)


def test_a_file_nested_beyond_the_parser_is_an_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"name": "t", "goal": "g", "steps": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(ScenarioError, match=r"deep.json: .*nested too deeply"):
        load_scenario(str(path))


def test_a_deeply_nested_python_value_is_checked_without_recursion():
    with pytest.raises(ScenarioError, match="at most 20 levels"):
        parse_scenario(scenario(steps=[{"tool": "x", "args": nested(50_000)}, {"final": "x"}]))


def test_a_goal_over_the_input_limit_is_refused(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps(scenario(goal="g" * 100_001)))
    with pytest.raises(ScenarioError, match="goal: expected at most 100,000 characters"):
        load_scenario(str(path))


@pytest.mark.parametrize("name", list_scenarios())
def test_every_bundled_scenario_is_valid(name):
    assert load_scenario(name).model_steps[-1].final
