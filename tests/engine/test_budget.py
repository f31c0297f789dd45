import pytest

from agents.config import ConfigError, ContextConfig, ModelProfile
from agents.context.budget import plan_budget


def test_spec_zones_at_reference_window():
    b = plan_budget(128_000, ContextConfig())
    assert (b.system, b.snapshot, b.history, b.summary_cap, b.reserve) == (3000, 2000, 16000, 8000, 1000)
    assert b.trigger_line == int(0.8 * 128_000)
    assert b.warning_line == int(0.6 * 128_000)
    assert b.input_limit == 127_000


def test_zones_scale_with_the_window():
    big = plan_budget(1_024_000, ContextConfig())
    assert big.history == 128_000 and big.summary_cap == 64_000 and big.reserve == 8000


def test_final_phase_grows_the_output_reserve():
    normal = plan_budget(128_000, ContextConfig())
    final = plan_budget(128_000, ContextConfig(), final_phase=True)
    assert final.reserve > normal.reserve
    assert final.input_limit < normal.input_limit


def test_summary_request_leaves_room_for_the_summary():
    b = plan_budget(4000, ContextConfig())
    assert b.summary_input_limit + b.summary_output == 4000
    assert b.summary_input_limit <= b.input_limit


@pytest.mark.parametrize("ratio", [1.0, 0.95, 0, -0.1])
def test_trigger_ratio_out_of_range_is_refused_clearly(ratio):
    with pytest.raises(ConfigError, match="trigger_ratio must be greater than 0 and at most 0.9"):
        ContextConfig(trigger_ratio=ratio)


def test_config_round_trips_and_ignores_unknown_keys():
    cfg = ContextConfig(trigger_ratio=0.7, max_rounds=3)
    again = ContextConfig.from_dict({**cfg.to_dict(), "unknown": 1})
    assert again == cfg


def test_unknown_model_without_window_warns():
    profile = ModelProfile.resolve("my-local-model")
    assert profile.context_size == 128_000
    assert "unknown" in profile.warnings[0]
    assert ModelProfile.resolve("gpt-4o").warnings == []


def test_cost_uses_cached_price():
    p = ModelProfile(price_input=2.0, price_cached_input=0.5, price_output=8.0)
    assert p.cost(1_000_000, 400_000, 100_000) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 0.8)
