"""A simulated session costs $0; the session header, the cost panel and the compare view
(tests/web/test_replay_pages.py) show what its calls would have cost at the benchmark's
named price tables, labelled as such (feature W9)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from agents import PRICE_TABLES
from taskos.drawer.events import load_events
from taskos.drawer.panels import CostPanel
from taskos.runs import services
from taskos.runs.prices import cost_at
from taskos.worker.execute import execute_session

from .factories import add_events, model_call
from .test_panels import panel_view

pytestmark = pytest.mark.django_db


def test_the_cost_panel_prices_a_simulated_run_at_each_named_table(session):
    add_events(session, model_call(1, 3000, cached=1000), model_call(2, 4000, cached=2500))
    context, html = panel_view(CostPanel(), session)
    rows = {row["table"]: row["cost"] for row in context["would_cost"]}
    assert list(rows) == list(PRICE_TABLES)
    # openai-like: 2.00 / 0.50 / 8.00 per 1M input / cached / output tokens.
    assert rows["openai-like"] == pytest.approx((3500 * 2.0 + 3500 * 0.5 + 240 * 8.0) / 1e6)
    assert f"${rows['openai-like']:,.4f}" in html and "openai-like prices" in html
    assert "would have cost at" in html


def test_the_session_header_says_what_a_simulated_run_would_have_cost(
        ann, ann_client, sim_profile, channels_redis_url):
    session = services.create_session(ann, "", "sales-report", sim_profile, 16000, {})
    execute_session(session)
    session.refresh_from_db()
    assert session.status == "finished" and session.cost == 0
    calls = [ev for ev in load_events(session, ["MODEL_CALL"])]
    expected = cost_at(calls, "openai-like")
    assert expected > 0
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    header = re.search(r'<div id="session-status".*?</div>', page, re.S).group(0)
    assert re.search(r"would cost <b>\$([\d.,]+)</b> at openai-like prices", header).group(1) \
        == f"{expected:,.4f}"


def test_the_header_cost_panel_and_compare_view_use_the_chosen_price_table(
        ann, ann_client, sim_profile, channels_redis_url, settings):
    settings.TASKOS_PRICE_TABLE = "anthropic-like"
    session = services.create_session(ann, "", "sales-report", sim_profile, 16000, {})
    execute_session(session)
    calls = [ev for ev in load_events(session, ["MODEL_CALL"])]
    expected = cost_at(calls, "anthropic-like")
    assert expected != cost_at(calls, "openai-like")
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    header = re.search(r'<div id="session-status".*?</div>', page, re.S).group(0)
    assert re.search(r"would cost <b>\$([\d.,]+)</b> at anthropic-like prices", header).group(1) \
        == f"{expected:,.4f}"
    context, html = panel_view(CostPanel(), session)
    assert [row["table"] for row in context["would_cost"]][0] == "anthropic-like"
    assert context["would_cost"][0]["chosen"] and "in the header" in html


def test_an_unknown_price_table_is_a_system_check_error(settings):
    from taskos.runs.prices import check_price_table, chosen_table

    settings.TASKOS_PRICE_TABLE = "anthropc-like"
    errors = check_price_table()
    assert [e.id for e in errors] == ["taskos.E101"]
    assert "openai-like" in errors[0].hint and chosen_table() == "openai-like"
    settings.TASKOS_PRICE_TABLE = "deepseek-like"
    assert check_price_table() == [] and chosen_table() == "deepseek-like"


@override_settings(TASKOS_PRICE_TABLE="anthropc-like")
def test_manage_py_check_fails_on_an_unknown_price_table():
    with pytest.raises(SystemCheckError, match="taskos.E101"):
        call_command("check")


def test_a_fresh_manage_py_check_runs_the_price_table_check():
    # In a new process nothing has imported taskos.runs.prices before the checks run:
    # only a check the runs app registers in ready() is among them.
    env = {**os.environ, "TASKOS_PRICE_TABLE": "anthropc-like"}
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "taskos.E101" in done.stderr and "'anthropc-like' is not a price table" in done.stderr


def test_calls_with_reported_cache_reads_and_writes_are_priced_by_them(session):
    # A provider with breakpoint caching (profile cache_marks) reports both figures: the
    # Anthropic-like table bills the written part at the write price, the rest plain.
    kind, payload = model_call(1, 3000)
    add_events(session, (kind, {**payload, "cache_read_tokens": 1000,
                                "cache_write_tokens": 1500}))
    calls = list(load_events(session, ["MODEL_CALL"]))
    assert cost_at(calls, "anthropic-like") == pytest.approx(
        (500 * 3.00 + 1500 * 3.75 + 1000 * 0.30 + 120 * 15.00) / 1e6)
    # The automatic table keeps the usual cached figure (none here).
    assert cost_at(calls, "openai-like") == pytest.approx((3000 * 2.00 + 120 * 8.00) / 1e6)
