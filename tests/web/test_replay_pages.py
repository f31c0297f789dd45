"""Replay with… and the comparison view (feature E2) through the dashboard."""
import re

import pytest

from taskos.runs import services
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
