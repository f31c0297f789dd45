"""runtask, bench and the pieces of the run command that need no subprocesses (features W6, W7)."""
import io
import json
import socket

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from taskos.ops import launcher
from taskos.ops.management.commands.runtask import ProgressBar
from taskos.ops.management.commands.up import ensure_admin, services_env
from taskos.runs.models import Session

pytestmark = pytest.mark.django_db

REPORT_KEYS = {"status", "turns", "model_calls", "total_input_tokens", "peak_input_tokens",
               "compactions", "over_window_requests", "anchor_survival", "engine_ms_per_call"}


def test_runtask_json_prints_exactly_one_report(sim_profile, channels_redis_url):
    out, err = io.StringIO(), io.StringIO()
    call_command("runtask", "--scenario", "retrieval-6x1600", "--json", stdout=out, stderr=err)
    report = json.loads(out.getvalue())  # one JSON document, nothing else on stdout
    assert REPORT_KEYS <= set(report)
    assert report["status"] == "finished" and report["over_window_requests"] == 0
    assert report["compactions"] >= 1 and report["peak_input_tokens"] <= 4000
    assert all({"input_tokens", "kind", "over_window"} <= set(c) for c in report["model_calls"])
    assert "steps" in err.getvalue()  # the progress bar went to stderr
    session = Session.objects.get()
    assert session.status == "finished" and session.owner is None
    assert session.events.filter(type="BUDGET").exists()


def test_runtask_json_reports_the_audit_of_a_hostile_summarizer(sim_profile, channels_redis_url):
    out = io.StringIO()
    # Clearing old tool results would spare this window every summary: it is turned off so
    # that the hostile summaries are asked for and audited.
    call_command("runtask", "--scenario", "oversized-results", "--summarizer", "hostile",
                 "--set", "clear_tool_results=false", "--json", stdout=out,
                 stderr=io.StringIO())
    report = json.loads(out.getvalue())
    assert report["status"] == "finished" and report["over_window_requests"] == 0
    assert report["invented_figures"] >= 1 and report["invented_unflagged"] == []
    assert report["unsupported_figures"] >= 1 and report["audit_failures"] >= 1
    session = Session.objects.get()
    assert session.context_settings["clear_tool_results"] is False
    failed = session.events.filter(type="AUDIT", payload__ok=False)
    assert failed.exists() and failed.first().payload["unsupported_figures"]


def test_runtask_window_option_and_human_output(sim_profile, channels_redis_url):
    out = io.StringIO()
    call_command("runtask", "--scenario", "retrieval-6x1600", "--window", "6000", stdout=out,
                 stderr=io.StringIO())
    assert Session.objects.get().window == 6000
    assert "finished after" in out.getvalue() and "peak_input_tokens" in out.getvalue()


def test_runtask_runs_a_free_goal_with_its_tools_and_turn_limit(sim_profile, channels_redis_url):
    out = io.StringIO()
    call_command("runtask", "--goal", "Count the files in the workspace.", "--profile", "sim",
                 "--tools", "list_files,read_file", "--max-turns", "7", "--json", stdout=out,
                 stderr=io.StringIO())
    report = json.loads(out.getvalue())
    session = Session.objects.get()
    assert session.goal == "Count the files in the workspace." and not session.scenario
    assert session.context_settings["tools"] == ["list_files", "read_file"]
    assert session.context_settings["max_turns"] == 7
    assert report["status"] == "finished" and report["count_source"] == "exact"
    offered = session.events.filter(type="MODEL_CALL").first().payload["messages"]
    assert offered  # the run went through the engine


def test_runtask_refuses_unknown_tools(sim_profile):
    with pytest.raises(CommandError, match="Unknown tools: web_search"):
        call_command("runtask", "--goal", "x", "--tools", "web_search", stdout=io.StringIO(),
                     stderr=io.StringIO())


def test_runtask_unknown_scenario_lists_the_bundled_ones(sim_profile):
    with pytest.raises(CommandError) as error:
        call_command("runtask", "--scenario", "no-such-thing", stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert "no-such-thing" in str(error.value)
    assert "retrieval-6x1600" in str(error.value) and "sales-report" in str(error.value)


def test_runtask_unknown_profile_is_explained(sim_profile):
    with pytest.raises(CommandError, match="No model profile 'gpt-9'. Profiles: sim"):
        call_command("runtask", "--scenario", "sales-report", "--profile", "gpt-9",
                     stdout=io.StringIO(), stderr=io.StringIO())


def test_progress_bar_draws_on_a_log_once_per_tenth():
    stream = io.StringIO()
    bar = ProgressBar(stream, width=10)
    for done in range(0, 101):
        bar(done, 100)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1] == "[##########] 100/100 steps"


def test_bench_merges_recall_latency_into_the_json(tmp_path, monkeypatch, db):
    import taskos.ops.management.commands.bench as bench_command
    monkeypatch.setattr(bench_command, "run_bench",
                        lambda json_path, out, **kw: out("table") or {"sales-report": {"turns": 14}})
    path = tmp_path / "bench.json"
    out = io.StringIO()
    call_command("bench", "--json", str(path), "--recall-rows", "300", "--db-runs", "0",
                 stdout=out)
    data = json.loads(path.read_text())
    assert data["sales-report"] == {"turns": 14}
    assert data["recall"]["rows"] == 300 and data["recall"]["p50_ms"] > 0
    assert "p50" in out.getvalue()
    with pytest.raises(CommandError, match="at least 100"):
        call_command("bench", "--recall-rows", "50", stdout=io.StringIO())


def test_bench_hands_the_summary_mode_to_the_runs_and_names_it_in_the_json(tmp_path,
                                                                           monkeypatch):
    import taskos.ops.management.commands.bench as bench_command
    asked = []
    monkeypatch.setattr(bench_command, "run_bench", lambda json_path, out, **kw: asked.append(
        kw["summarizer"]) or {})
    path = tmp_path / "bench.json"
    call_command("bench", "--json", str(path), "--recall-rows", "0", "--db-runs", "0",
                 "--summarizer", "hostile", stdout=io.StringIO())
    assert asked == ["hostile"] and json.loads(path.read_text())["summarizer"] == "hostile"
    call_command("bench", "--json", str(path), "--recall-rows", "0", "--db-runs", "0",
                 stdout=io.StringIO())
    assert asked == ["hostile", None] and json.loads(path.read_text())["summarizer"] == "faithful"
    with pytest.raises(CommandError):
        call_command("bench", "--summarizer", "cheerful", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)  # its commits are real ones, counted
def test_bench_measures_the_database_path_against_memory_and_names_the_target(
        sim_profile, channels_redis_url, monkeypatch, tmp_path):
    """`bench --db-runs N`: the same scenario run the way runtask runs it and in memory,
    alternately; its figures, statements and commits per turn, and the issue-8 target. A
    short scenario here: the figures, not their size, are what is checked."""
    import taskos.ops.management.commands.bench as bench_command
    from taskos.ops import db_path_bench
    from taskos.runs.models import Session
    monkeypatch.setattr(bench_command, "run_bench", lambda json_path, out, **kw: {})
    monkeypatch.setattr(db_path_bench, "SCENARIO", "sales-report")
    before = Session.objects.count()
    path, out = tmp_path / "bench.json", io.StringIO()
    call_command("bench", "--json", str(path), "--recall-rows", "0", "--db-runs", "2",
                 stdout=out)
    db_path = json.loads(path.read_text())["db_path"]
    assert db_path["vendor"] == connection.vendor and db_path["statuses"] == ["finished"]
    assert len(db_path["memory_median_ms"]) == len(db_path["database_median_ms"]) == 2
    assert all(ms > 0 for ms in db_path["memory_median_ms"] + db_path["database_median_ms"])
    assert db_path["statements_per_turn"] > 5 and db_path["commits_per_turn"] >= 2
    # PostgreSQL sends a batch's writes as one query; elsewhere each is a query of its own
    if connection.vendor == "postgresql":
        assert db_path["queries_per_turn"] < db_path["statements_per_turn"]
    else:
        assert db_path["queries_per_turn"] == db_path["statements_per_turn"]
    assert f"{db_path['ratio']}× the in-memory one (target <= 2.0)" in out.getvalue()
    assert Session.objects.count() == before  # its sessions are deleted
    with pytest.raises(CommandError, match="--db-runs"):
        call_command("bench", "--db-runs", "-1", stdout=io.StringIO())


def test_up_refuses_a_taken_port_with_a_clear_message():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"Port {port} on 127.0.0.1 is taken"):
            call_command("up", "--port", str(port), stdout=io.StringIO())


def test_private_redis_port_taken_is_explained(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        run = launcher.Launcher(redis_port=busy.getsockname()[1], base_dir=tmp_path,
                                say=lambda text: None)
        with pytest.raises(launcher.LaunchError, match="--redis-port"):
            run.resolve_redis(None)
    assert run.children == []


def test_a_reachable_redis_url_is_used_as_is(tmp_path, channels_redis_url):
    said = []
    run = launcher.Launcher(base_dir=tmp_path, say=said.append)
    assert run.resolve_redis(channels_redis_url) == channels_redis_url
    assert run.children == [] and not run.started_own_redis
    assert said == [f"Using Redis at {channels_redis_url}"]


def test_a_redis_server_binary_is_found():
    import os
    binary = launcher.find_redis_server()
    assert binary and os.access(binary, os.X_OK)


def test_admin_is_created_once_and_its_password_shown_once(monkeypatch, django_user_model):
    monkeypatch.delenv("TASKOS_ADMIN_PASSWORD", raising=False)
    first = ensure_admin()
    password = first.split(" / ")[1].split()[0]
    admin = django_user_model.objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert password not in ensure_admin()
    monkeypatch.setenv("TASKOS_ADMIN_PASSWORD", "correct-horse-battery")
    assert "TASKOS_ADMIN_PASSWORD" in ensure_admin()
    admin.refresh_from_db()
    assert admin.check_password("correct-horse-battery")


def test_up_warns_when_the_listening_host_is_not_an_allowed_host(settings):
    from taskos.ops.management.commands.up import Command
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    out = io.StringIO()
    command = Command(stdout=out)
    command.warn_about_hosts("127.0.0.1")
    assert out.getvalue() == ""
    command.warn_about_hosts("0.0.0.0")
    assert "TASKOS_ALLOWED_HOSTS" in out.getvalue()


def test_runtask_runs_sub_agents_inline_and_shows_what_they_added(sim_profile,
                                                                 channels_redis_url):
    out = io.StringIO()
    call_command("runtask", "--scenario", "research-subagents", "--json", stdout=out,
                 stderr=io.StringIO())
    report = json.loads(out.getvalue())
    assert report["status"] == "finished"
    children = report["children"]
    assert [c["status"] for c in children["sessions"]] == ["finished"] * 3
    growth = children["growth_at_resume"][0]
    # The parent's next call grew by the answers (and its own delegate call), while the
    # children read tens of thousands of tokens in their own contexts.
    assert growth["input_after"] - growth["input_before"] < 2 * children["answers_tokens"]
    assert children["children_input_tokens"] > 20 * children["answers_tokens"]
    assert len(children["parent_agent_input_tokens"]) == 2
    parent = Session.objects.get(parent__isnull=True)
    assert parent.status == "finished" and parent.children.count() == 3
    assert children["cost_with_children"] == round(parent.cost_with_children(), 6)


def test_up_paces_the_simulated_model_for_watching_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("TASKOS_SIM_LATENCY_MS", raising=False)
    env = services_env("redis://127.0.0.1:6390/0")
    assert env["TASKOS_SIM_LATENCY_MS"] == "200" and env["REDIS_URL"] == "redis://127.0.0.1:6390/0"
    monkeypatch.setenv("TASKOS_SIM_LATENCY_MS", "0")
    assert services_env("redis://x")["TASKOS_SIM_LATENCY_MS"] == "0"


@pytest.mark.parametrize("argv", [["runtask", "--scenario", "sales-report"],
                                  ["bench", "--recall-rows", "0"], ["replay", "1"]])
def test_commands_on_an_unmigrated_database_say_to_migrate(argv, monkeypatch):
    from django.db.migrations.executor import MigrationExecutor
    planned = MigrationExecutor.migration_plan
    # The plan a fresh database has: every migration, none applied.
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: planned(
        self, targets, clean_start=True))
    with pytest.raises(CommandError, match=r"migration\(s\) not applied yet. Run `python "
                                           r"manage.py migrate` first"):
        call_command(*argv, stdout=io.StringIO(), stderr=io.StringIO())


def test_a_migrated_database_passes_the_check(db):
    from taskos.ops.management.migrated import require_migrated
    require_migrated()
