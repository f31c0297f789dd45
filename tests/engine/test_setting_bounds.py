"""Every number a person sets has a range, declared next to its field and checked by one
function (issue 25 items 6 and 8): context settings, profile fields, scenario files."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from agents.config import (MAX_TURNS, WINDOW, ConfigError, ContextConfig, ModelProfile,
                           check_number, profile_settings)
from agents.scenarios import ScenarioError, list_scenarios, load_scenario, parse_scenario

HUGE = 10**20


@pytest.mark.parametrize("name, value", [
    ("tool_result_limit", HUGE), ("max_rounds", HUGE), ("max_turns", HUGE),
    ("max_image_num", HUGE), ("tool_retries_limit", HUGE), ("time_interval_hours", 1e20),
    ("trigger_ratio", math.inf), ("reserve_ratio", math.nan), ("context_buffer_ratio", -0.1),
    ("max_rounds", 0), ("tool_retries_limit", 0), ("max_turns", 0), ("tool_result_limit", -5),
    ("max_rounds", 2.5), ("max_rounds", True), ("trigger_ratio", "0.5"),
])
def test_from_dict_refuses_a_number_out_of_its_range_naming_field_value_and_range(name, value):
    with pytest.raises(ConfigError) as error:
        ContextConfig.from_dict({name: value})
    message = str(error.value)
    assert message.startswith(f"{name} must be") and " and " in message  # the whole range
    assert f"got {HUGE}" in message if value is HUGE else "(got " in message


def test_the_message_says_the_value_and_the_allowed_range():
    with pytest.raises(ConfigError, match=r"^tool_result_limit must be at least 100 tokens and at "
                                          r"most 100000000 tokens \(got 100000000000000000000\)"):
        ContextConfig.from_dict({"tool_result_limit": HUGE})


@pytest.mark.parametrize("data", [[1, 2], "max_rounds=5", 7])
def test_settings_that_are_not_an_object_are_refused_clearly(data):
    with pytest.raises(ConfigError, match="Context settings must be an object"):
        ContextConfig.from_dict(data)


@pytest.mark.parametrize("data", [{"tools": "read_file"}, {"delegation_enabled": "yes"},
                                  {"timezone": 5}, {"timezone": "Mars/Olympus"}])
def test_other_settings_of_the_wrong_kind_are_refused(data):
    with pytest.raises(ConfigError):
        ContextConfig.from_dict(data)


def test_an_unknown_name_is_ignored_from_a_stored_row_and_refused_when_strict():
    assert ContextConfig.from_dict({"max_rounds": 3, "old_knob": 1}).max_rounds == 3
    with pytest.raises(ConfigError, match="Unknown context setting 'old_knob'"):
        ContextConfig.from_dict({"old_knob": 1}, strict=True)


def test_every_number_setting_carries_its_range():
    for spec in dataclasses.fields(ContextConfig):
        if spec.type in ("int", "float"):
            bounds = spec.metadata["bounds"]
            assert bounds.low < bounds.high <= WINDOW.high, spec.name


def test_the_values_the_project_uses_stay_inside_the_ranges():
    # The defaults, and the settings bundled scenarios, tests and the benchmark use.
    ContextConfig()
    ContextConfig(trigger_ratio=0.6, max_rounds=40, tool_result_limit=300,
                  time_interval_hours=2, tool_retries_limit=12, max_turns=1200)
    ModelProfile(context_size=100_000_000)  # the benchmark's unmanaged window
    ModelProfile(read_timeout=300.0, call_timeout=600.0, retry_budget=900.0, num_ctx=32_768,
                 temperature=0.2, top_p=1, price_input=2.0, price_output=8.0)
    for name in list_scenarios():
        window = load_scenario(name).window
        assert window is None or check_number("window", window, WINDOW)


def test_every_number_a_person_sets_on_a_profile_has_both_ends():
    numbers = [(spec, how) for spec, how in profile_settings()
               if spec.type.split(" ")[0] in ("int", "float") and not how.learnt]
    assert {spec.name for spec, _ in numbers} >= {"context_size", "connect_timeout",
                                                  "read_timeout", "call_timeout",
                                                  "retry_budget", "num_ctx"}
    for spec, how in numbers + [(f, f.metadata["setting"]) for f in
                                dataclasses.fields(ModelProfile) if f.name == "sim_latency_ms"]:
        assert how.minimum is not None and how.maximum is not None, spec.name
    money = [spec.name for spec, how in profile_settings() if how.money]
    assert all(how.maximum is not None for spec, how in profile_settings() if how.money), money


@pytest.mark.parametrize("fields, named", [
    ({"read_timeout": 1e308}, "read_timeout"), ({"connect_timeout": math.inf}, "connect_timeout"),
    ({"retry_budget": -1}, "retry_budget"), ({"context_size": HUGE}, "context_size"),
    ({"price_output": -2.0}, "price_output"), ({"num_ctx": 0}, "num_ctx"),
    ({"call_timeout": math.nan}, "call_timeout"),
])
def test_the_engine_profile_refuses_numbers_out_of_their_range(fields, named):
    with pytest.raises(ConfigError, match=f"^{named} must be"):
        ModelProfile(**fields)


def scenario(**overrides):
    data = {"name": "t", "goal": "g", "steps": [{"tool": "list_files", "args": {}},
                                                {"final": "done"}]}
    data.update(overrides)
    return data


@pytest.mark.parametrize("data, message", [
    (scenario(window=HUGE), f"window: expected a whole number of at least 1000 tokens and at "
                            f"most 100000000 tokens, got {HUGE}"),
    (scenario(window=math.inf), "window: expected a whole number"),
    (scenario(steps=[{"repeat": HUGE, "tool": "list_files"}, {"final": "done"}]),
     "steps[0].repeat: expected a whole number of at least 1 and at most 100000"),
    (scenario(steps=[{"repeat": 2, "from": HUGE, "tool": "list_files"}, {"final": "done"}]),
     "steps[0].from: expected a whole number of at least 1 and at most 1000000000"),
    # Each repeat is in range, but together they are more turns than a session may run.
    (scenario(steps=[{"repeat": 100_000, "tool": "list_files"}] * 3 + [{"final": "done"}]),
     f"steps: expected at most {MAX_TURNS} steps once repeats are expanded, got 300001"),
])
def test_scenario_numbers_are_bounded_by_the_same_check(data, message):
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data)
    assert message in str(error.value)


def test_a_scenario_file_with_an_infinite_window_is_refused(tmp_path):
    path = tmp_path / "inf.json"
    path.write_text(json.dumps(scenario(window=math.inf)))  # Python writes it as Infinity
    with pytest.raises(ScenarioError, match="window: expected a whole number"):
        load_scenario(str(path))
