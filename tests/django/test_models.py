"""The domain models (feature W1): fields, constraints, helpers and the default profile."""
import datetime
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

import agents.config
from taskos.runs.models import (Anchor, ArchivedTurn, ModelProfile, Session, SessionEvent, Task,
                                search_terms)

pytestmark = pytest.mark.django_db


def test_data_migration_creates_the_simulated_profile():
    profile = ModelProfile.objects.get(name="sim")
    assert profile.model == "taskos-sim"
    assert profile.context_size == 128_000
    assert profile.simulated


def test_profile_converts_to_the_engine_profile_with_a_smaller_window():
    profile = ModelProfile.objects.create(
        name="deepseek", model="deepseek-chat", base_url="https://api.deepseek.com/v1",
        api_key_env="DEEPSEEK_API_KEY", context_size=65_536, price_input=Decimal("0.27"),
        price_cached_input=Decimal("0.07"), price_output=Decimal("1.10"), num_ctx=None)
    engine = profile.to_engine(context_size=16_000)
    assert isinstance(engine, agents.config.ModelProfile)
    assert (engine.model, engine.base_url, engine.api_key_env) == (
        "deepseek-chat", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY")
    assert engine.context_size == 16_000
    assert engine.price_input == pytest.approx(0.27) and engine.price_output == pytest.approx(1.1)
    assert not engine.simulated and not profile.simulated
    assert profile.to_engine().context_size == 65_536


def test_profile_keeps_the_token_ratio_a_session_learnt_and_hands_it_to_the_engine():
    profile = ModelProfile.objects.create(name="local", model="smollm2", api_key_env="",
                                          base_url="http://127.0.0.1:8436/v1", temperature=0.1,
                                          local=True,
                                          server_tokenizer=True)
    profile.learn_token_ratio({"token_ratio": 1.0812, "token_ratio_calls": 41})
    profile.learn_token_ratio({"token_ratio": 1.5, "token_ratio_calls": 3})  # fewer calls: kept
    profile.refresh_from_db()
    assert (profile.token_ratio, profile.token_ratio_calls) == (1.0812, 41)
    engine = profile.to_engine()
    assert (engine.token_ratio, engine.token_ratio_calls) == (1.0812, 41)
    assert engine.temperature == 0.1 and engine.server_tokenizer
    sim = ModelProfile.objects.get(name="sim")
    sim.learn_token_ratio({"token_ratio": 1.2, "token_ratio_calls": 5})
    sim.refresh_from_db()
    assert sim.token_ratio_calls == 0


def test_session_defaults_and_progress_helpers(make_session):
    session = make_session()
    assert session.status == Session.Status.QUEUED and session.is_active
    assert session.compact_request is None and not session.cancel_requested
    Task.objects.create(session=session, task_id="1", subject="load", state="completed")
    Task.objects.create(session=session, task_id="2", subject="aggregate", state="in_progress")
    Task.objects.create(session=session, task_id="3", subject="report")
    fetched = Session.objects.prefetch_related("tasks").get(pk=session.pk)
    assert (fetched.tasks_done, fetched.tasks_total) == (1, 3)
    Session.objects.filter(pk=session.pk).update(status=Session.Status.FINISHED)
    session.refresh_from_db()
    assert not session.is_active


def test_each_session_has_its_own_workspace_folder(make_session, workspaces_in_tmp):
    session = make_session()
    assert session.workspace.parent == workspaces_in_tmp
    assert session.workspace.name.startswith(f"{session.pk}-")
    before = session.workspace
    # Same number, other creation time (a recreated database): another folder, so a new
    # session never inherits an older session's files.
    session.created_at -= datetime.timedelta(days=1)
    assert session.workspace != before


def test_task_ids_are_unique_per_session(make_session):
    first, second = make_session(), make_session()
    Task.objects.create(session=first, task_id="1", subject="a")
    Task.objects.create(session=second, task_id="1", subject="a")  # other session: fine
    with pytest.raises(IntegrityError), transaction.atomic():
        Task.objects.create(session=first, task_id="1", subject="again")


def test_event_seq_is_unique_per_session_and_events_come_in_seq_order(make_session):
    session = make_session()
    now = timezone.now()
    SessionEvent.objects.create(session=session, seq=2, type="BUDGET", payload={}, at=now)
    SessionEvent.objects.create(session=session, seq=1, type="SESSION_STARTED", payload={}, at=now)
    assert [e.seq for e in session.events.all()] == [1, 2]
    with pytest.raises(IntegrityError), transaction.atomic():
        SessionEvent.objects.create(session=session, seq=2, type="ERROR", payload={}, at=now)


def test_event_to_dict_matches_the_engine_event_shape(make_session):
    session = make_session()
    event = SessionEvent.objects.create(session=session, seq=1, type="BUDGET",
                                        payload={"window": 8000}, turn=3, at=timezone.now())
    data = event.to_dict()
    assert set(data) == {"type", "payload", "turn", "session_id", "seq", "at"}
    assert data["session_id"] == str(session.pk) and data["payload"] == {"window": 8000}


def test_archived_turn_keeps_content_whole_and_fills_its_search_words(make_session):
    session = make_session()
    content = "区域销售额 fell in Q3; missing_ratio=0.04 " + "x" * 300_000
    row = ArchivedTurn.objects.create(session=session, turn=1, role="tool", content=content,
                                      tool_name="csv_describe")
    row.refresh_from_db()
    assert row.content == content
    words = row.search_text.split()
    assert {"销", "售", "fell", "missing_ratio", "csv_describe"} <= set(words)
    assert all(len(w) <= 64 for w in words)  # the 300 000-character run is not indexed
    assert row.ref == f"arc:{session.pk}:{row.pk}"


def test_binary_rows_index_only_their_tool_name():
    assert search_terms("aGVsbG8gd29ybGQ=", "screenshot", is_binary=True) == "screenshot"


def test_anchor_tiers_have_labels(make_session):
    anchor = Anchor.objects.create(session=make_session(), tier=1,
                                   text="output must include a table")
    assert anchor.get_tier_display().startswith("Tier 1")
    assert anchor.source == "user" and anchor.active


def test_an_unknown_model_without_a_window_is_warned_about_never_silently_128k():
    unknown = ModelProfile.objects.create(name="mine", model="my-llm", api_key_env="",
                                          base_url="http://127.0.0.1:9/v1", local=True)
    assert unknown.context_size is None and unknown.effective_window == 128_000
    assert "'my-llm' is unknown" in unknown.window_warning
    assert unknown.to_engine().warnings == [unknown.window_warning]
    assert unknown.to_engine(context_size=4096).warnings  # a smaller window is still a guess
    known = ModelProfile.objects.create(name="ds", model="deepseek-chat", api_key_env="",
                                        base_url="https://api.deepseek.com/v1")
    assert known.effective_window == 65_536 and not known.window_warning
    unknown.context_size = 8192
    assert unknown.effective_window == 8192 and not unknown.window_warning
    assert not ModelProfile.objects.get(name="sim").window_warning


def test_the_learnt_overheads_are_kept_with_the_ratio():
    profile = ModelProfile.objects.create(name="loc", model="m", api_key_env="", local=True,
                                          base_url="http://127.0.0.1:9/v1", context_size=4096)
    profile.learn_token_ratio({"token_ratio": 1.05, "token_ratio_calls": 6,
                               "token_overheads": {"auto:2/615": 412.5, "none:2/615": -380.0}})
    profile.refresh_from_db()
    assert profile.to_engine().token_overheads == {"auto:2/615": 412.5, "none:2/615": -380.0}
    assert not profile.to_engine().probe_questions


def test_the_local_profile_asks_for_weak_model_requests_and_paid_ones_do_not():
    from taskos.ops.localmodel import register_profile

    local = register_profile(port=8453, n_ctx=4096).to_engine()
    assert local.tool_free_summaries and local.single_system_message and local.probe_questions
    paid = ModelProfile.objects.create(name="paid", model="gpt-4o-mini",
                                       base_url="https://api.openai.com/v1").to_engine()
    # the cache-stable summary request and the system messages as they are (C17)
    assert not paid.tool_free_summaries and not paid.single_system_message


def test_the_sim_latency_setting_paces_only_the_simulated_profile(settings):
    settings.TASKOS_SIM_LATENCY_MS = 150.0
    assert ModelProfile.objects.get(name="sim").to_engine().sim_latency_ms == 150.0
    real = ModelProfile.objects.create(name="ds2", model="deepseek-chat", api_key_env="",
                                       base_url="https://api.deepseek.com/v1")
    assert real.to_engine().sim_latency_ms == 0.0
    settings.TASKOS_SIM_LATENCY_MS = 0.0
    assert ModelProfile.objects.get(name="sim").to_engine().sim_latency_ms == 0.0


def test_the_models_match_their_migrations():
    # The profile's columns are built from the engine's field definitions: a change there
    # must come with its migration.
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:
        pytest.fail(f"models and migrations differ:\n{out.getvalue()}")


def test_every_kept_engine_profile_field_is_a_column_with_its_help():
    columns = {f.name: f for f in ModelProfile._meta.get_fields() if hasattr(f, "help_text")}
    for spec, how in agents.config.profile_settings():
        assert spec.name in columns, spec.name
        assert columns[spec.name].help_text == how.help, spec.name
        assert columns[spec.name].editable is not how.learnt, spec.name
