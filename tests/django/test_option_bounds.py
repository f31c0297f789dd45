"""Numbers from the command line, the start form and the services go through the engine's
one range check (issue 25 item 6): 10**20, 0 where it means nothing, inf and nan are refused."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from taskos.runs import services
from taskos.runs.models import Session

pytestmark = pytest.mark.django_db

HUGE = str(10**20)


@pytest.mark.parametrize("args, message", [
    (["--max-turns", HUGE], f"max_turns must be at least 1 and at most 100000 (got {HUGE})"),
    (["--max-turns", "0"], "max_turns must be at least 1"),  # was dropped: 400 turns ran
    (["--window", HUGE], f"at most 100000000 tokens (got {HUGE})"),
    (["--window", "0"], "The window must be at least 1000 tokens"),  # was the default window
])
def test_runtask_refuses_numbers_out_of_range_before_it_creates_a_session(sim_profile, args,
                                                                          message):
    with pytest.raises(CommandError) as error:
        call_command("runtask", "--scenario", "sales-report", *args, stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert message in str(error.value)
    assert not Session.objects.exists()


@pytest.mark.parametrize("pair, message", [
    (f"max_rounds={HUGE}", "max_rounds must be at least 1 and at most 1000"),
    (f"tool_result_limit={HUGE}", f"(got {HUGE})"),
    ("reserve_ratio=nan", "reserve_ratio must be at least 0 and less than 0.5 (got nan)"),
    ("window=0", "The window must be at least 1000 tokens"),  # was the recorded window
])
def test_replay_refuses_settings_out_of_range(make_session, pair, message, monkeypatch):
    source = make_session(status="finished")
    monkeypatch.setattr("taskos.replays.sessions.load_recording", lambda session: None)
    with pytest.raises(CommandError) as error:
        call_command("replay", str(source.pk), "--set", pair, stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert message in str(error.value)
    assert Session.objects.filter(replay_of=source).count() == 0


@pytest.mark.parametrize("args, message", [
    (["--recall-rows", HUGE], "--recall-rows (0 skips it) must be at least 100 and at most"),
    (["--recall-rows", "50"], "--recall-rows (0 skips it) must be at least 100"),
    (["--db-runs", HUGE], "--db-runs (0 skips it) must be at least 0 and at most 100"),
    (["--db-runs", "-1"], "--db-runs (0 skips it) must be at least 0"),
])
def test_bench_refuses_options_out_of_range_before_it_runs(monkeypatch, args, message):
    import taskos.ops.management.commands.bench as bench_command
    ran = []
    monkeypatch.setattr(bench_command, "run_bench", lambda *a, **kw: ran.append(1) or {})
    monkeypatch.setattr(bench_command, "measure", lambda rows: ran.append(rows) or {})
    with pytest.raises(CommandError) as error:
        call_command("bench", "--db-runs", "0", "--recall-rows", "0", *args,
                     stdout=io.StringIO())
    assert message in str(error.value) and ran == []


@pytest.mark.parametrize("window", [10**20, 999_999_999, 1.5e4])
def test_checked_window_refuses_what_is_no_window(sim_profile, window):
    with pytest.raises(services.SessionError, match="The window must be"):
        services.checked_window(window, sim_profile)


def test_a_stored_row_out_of_range_is_not_run(make_session):
    from taskos.worker.execute import execute_session

    session = make_session(context_settings={"max_rounds": 10**20})
    execute_session(session)
    session.refresh_from_db()
    assert session.status == "failed"
    assert session.error.startswith("settings_invalid: max_rounds must be at least 1")
