"""Replay with… and the comparison view (feature E2) through the dashboard."""
import re

import pytest

from taskos.runs import services
from taskos.replays.sessions import create_replay
from taskos.runs.models import Session
from taskos.worker.execute import execute_session
from taskos.worker.tasks import run_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded(ann, sim_profile, channels_redis_url):
    session = services.create_session(ann, "", "sales-report", sim_profile, 16000, {})
    execute_session(session)
    session.refresh_from_db()
    return session


def test_replay_with_a_smaller_window_then_compare_side_by_side(ann_client, recorded, settings):
    page = ann_client.get(f"/sessions/{recorded.pk}/").content.decode()
    assert f'href="/sessions/{recorded.pk}/replay"' in page
    form = ann_client.get(f"/sessions/{recorded.pk}/replay").content.decode()
    assert 'name="window" value="16000"' in form  # starts from the recorded settings
    for window, trigger in (("8000", "0.6"), ("16000", "0.8")):
        answer = ann_client.post(f"/sessions/{recorded.pk}/replay", {
            "profile": recorded.profile_id, "window": window, "trigger_ratio": trigger,
            "reserve_ratio": "0.1", "context_buffer_ratio": "0.2", "tool_result_limit": "50000",
            "max_rounds": "5", "compression_fallback_to_truncation": "on"})
        assert answer.status_code == 302 and answer["Location"] == f"/sessions/{recorded.pk}/compare"
    replays = list(Session.objects.filter(replay_of=recorded).order_by("id"))
    assert [r.window for r in replays] == [8000, 16000]
    waiting = ann_client.get(f"/sessions/{recorded.pk}/compare").content.decode()
    assert "running…" in waiting and 'http-equiv="refresh"' in waiting
    for replay in replays:
        run_session.apply(args=[replay.pk])
    html = ann_client.get(f"/sessions/{recorded.pk}/compare").content.decode()
    rows = re.findall(r'<tr data-session="(\d+)">', html)
    assert rows == [str(recorded.pk)] + [str(r.pk) for r in replays]
    assert html.count("<polyline") == 3  # the overlaid curves, one per run
    assert "<code>window=8000</code> <code>trigger_ratio=0.6</code>" in html
    smaller, same = replays
    assert re.search(rf'turn \d+: <a href="/sessions/{recorded.pk}/calls/\d+/">call \d+</a> '
                     rf'vs <a href="/sessions/{smaller.pk}/calls/\d+/">', html)
    # The replay with the recorded settings has the same contexts, but its archive refs
    # are its own: not byte for byte identical, and said so.
    assert "same contexts, archive refs differ from turn" in html and "identical<" not in html
    # Simulated runs cost $0: the cost column shows them at a named price table.
    assert html.count("at openai-like prices") == 3 and "$0.0000" not in html
    cheaper = ann_client.get(f"/sessions/{recorded.pk}/compare?prices=deepseek-like")
    assert cheaper.content.decode().count("at deepseek-like prices") == 3
    settings.TASKOS_PRICE_TABLE = "anthropic-like"  # the deployment's choice is the default
    chosen = ann_client.get(f"/sessions/{recorded.pk}/compare").content.decode()
    assert chosen.count("at anthropic-like prices") == 3
    # The first-difference links open the call on a styled page of its own.
    link = re.search(rf'href="(/sessions/{smaller.pk}/calls/\d+/)"', html).group(1)
    call_page = ann_client.get(link).content.decode()
    assert "<link rel=\"stylesheet\"" in call_page and 'class="inspector"' in call_page
    only = ann_client.get(f"/sessions/{recorded.pk}/compare?runs={smaller.pk}").content.decode()
    assert re.findall(r'<tr data-session="(\d+)">', only) == [str(recorded.pk), str(smaller.pk)]
    # a replay's page links back to the comparison of its recording
    assert f'href="/sessions/{recorded.pk}/compare"' in ann_client.get(
        f"/sessions/{smaller.pk}/").content.decode()


def test_a_bad_setting_is_shown_by_its_field_and_nothing_is_created(ann_client, recorded):
    answer = ann_client.post(f"/sessions/{recorded.pk}/replay", {
        "profile": recorded.profile_id, "window": "16000", "trigger_ratio": "1.0",
        "reserve_ratio": "0.1", "context_buffer_ratio": "0.2", "tool_result_limit": "50000",
        "max_rounds": "5"})
    assert answer.status_code == 400 and "trigger_ratio must be" in answer.content.decode()
    assert not Session.objects.filter(replay_of=recorded).exists()


def test_someone_else_cannot_replay_or_compare(client, bob, recorded):
    client.force_login(bob)
    assert client.get(f"/sessions/{recorded.pk}/replay").status_code == 404
    assert client.get(f"/sessions/{recorded.pk}/compare").status_code == 404


def test_a_delegating_session_is_replayed_from_the_page_with_its_answers_reused(
        ann, ann_client, sim_profile, channels_redis_url):
    from taskos.drawer.panels import ChildrenPanel
    from taskos.worker.execute import execute_tree
    from tests.web.test_panels import panel_view
    parent = services.create_session(ann, "", "research-subagents", sim_profile, None, {})
    execute_tree(parent)
    children = list(parent.children.order_by("id"))
    form = ann_client.get(f"/sessions/{parent.pk}/replay").content.decode()
    assert "delegated to 3 sub-agents: the replay reuses each one's recorded answer" in form
    answer = ann_client.post(f"/sessions/{parent.pk}/replay", {
        "profile": parent.profile_id, "window": "2000", "trigger_ratio": "0.8",
        "reserve_ratio": "0.1", "context_buffer_ratio": "0.2", "tool_result_limit": "50000",
        "max_rounds": "5", "compression_fallback_to_truncation": "on"})
    assert answer.status_code == 302
    replay = Session.objects.get(replay_of=parent)
    run_session.apply(args=[replay.pk])
    html = ann_client.get(f"/sessions/{parent.pk}/compare").content.decode()
    note = re.search(r'<p class="reused" data-session="(\d+)">(.*?)</p>', html, re.S)
    assert note and note.group(1) == str(replay.pk)
    assert "reused the recorded answers of 3 sub-agents" in note.group(2)
    assert all(f'href="/sessions/{c.pk}/"' in note.group(2) for c in children)
    context, panel = panel_view(ChildrenPanel(), Session.objects.get(pk=replay.pk))
    assert context["children"] == [] and [r["pk"] for r in context["reused"]] == [
        str(c.pk) for c in children]
    assert "This replay ran no sub-agent" in panel


@pytest.fixture
def marking_profile(db):
    """The simulated model behind a provider whose prompt cache is opt-in: requests carry
    cache marks, and each call reports what it read from and wrote to the marked cache."""
    from taskos.runs.models import ModelProfile
    return ModelProfile.objects.create(name="sim-marked", model="taskos-sim",
                                       context_size=128_000, cache_marks=True)


def test_the_compare_view_reads_and_prices_the_marked_cache(ann, ann_client, marking_profile,
                                                            channels_redis_url):
    from agents import PRICE_TABLES
    from taskos.replays.compare import compare
    from taskos.runs.models import SessionEvent
    from taskos.runs.prices import session_cost_at

    recorded = services.create_session(ann, "", "sales-report", marking_profile, 16000, {})
    execute_session(recorded)
    recorded.refresh_from_db()
    assert recorded.status == "finished"
    replay = create_replay(recorded, ann)
    run_session.apply(args=[replay.pk])
    payloads = list(SessionEvent.objects.filter(session=recorded, type="MODEL_CALL")
                    .values_list("payload", flat=True))
    read = sum(p["cache_read_tokens"] for p in payloads)
    written = sum(p["cache_write_tokens"] for p in payloads)
    assert read > 0 and written > 0
    result = compare(recorded, [replay])
    source, (replayed,) = result["source"], result["replays"]
    assert (source["cache_read_tokens"], source["cache_write_tokens"]) == (read, written)
    # Replayed with the recorded settings, the same requests read and write the same.
    for key in ("cache_read_tokens", "cache_write_tokens"):
        assert replayed["differences"][key] == {"source": source[key], "replay": source[key],
                                                "delta": 0, "change": 0.0}
    # Priced as the engine's own report priced them while the session ran: the written
    # tokens at the table's write price, the read ones at its cached price.
    for table in PRICE_TABLES:
        assert source["costs_at"][table] == pytest.approx(
            session_cost_at(recorded, table), abs=1e-6), table
    html = ann_client.get(f"/sessions/{recorded.pk}/compare?prices=anthropic-like"
                          ).content.decode()
    cells = re.findall(r'<td class="cache-marked">([^<]*)</td>', html)
    assert cells == [f"{read:,} / {written:,}"] * 2
    shown = re.findall(r"\$([\d.,]+) <span class=\"muted\">at anthropic-like prices", html)
    assert shown == [f"{source['costs_at']['anthropic-like']:,.4f}"] * 2


def test_runs_without_a_marked_cache_show_no_cache_reads_or_writes(ann_client, recorded):
    html = ann_client.get(f"/sessions/{recorded.pk}/compare").content.decode()
    assert re.search(r'<td class="cache-marked"><span class="muted"[^>]*>–</span></td>', html)
