"""Archive search specifics of DjangoStore: index kept in sync, ranking, the PostgreSQL
window path, and the recall benchmark helper."""
import pytest

from taskos.runs import recall_bench, search
from taskos.runs.models import ArchivedTurn, Session
from taskos.runs.store import DjangoStore

pytestmark = pytest.mark.django_db


@pytest.fixture
def store_and_session(make_session):
    return DjangoStore(), make_session()


def test_tool_names_are_searchable(store_and_session):
    store, session = store_and_session
    store.archive(str(session.pk), 1, "tool", "12 rows", tool_name="csv_describe")
    assert [h.tool_name for h in store.search_archive(str(session.pk), "csv_describe")] == [
        "csv_describe"]


def test_deleted_and_edited_rows_leave_the_index(store_and_session):
    store, session = store_and_session
    sid = str(session.pk)
    store.archive(sid, 1, "tool", "quarterly margin report")
    row = ArchivedTurn.objects.get(session=session)
    row.search_text = "inventory levels"
    row.save()
    assert store.search_archive(sid, "margin") == []
    assert len(store.search_archive(sid, "inventory")) == 1
    row.delete()
    assert store.search_archive(sid, "inventory") == []


def test_more_words_matched_ranks_above_newer_rows(store_and_session):
    store, session = store_and_session
    sid = str(session.pk)
    store.archive(sid, 1, "tool", "east region revenue dropped")          # 2 of 3
    store.archive(sid, 2, "tool", "revenue table refreshed")              # 1 of 3
    store.archive(sid, 3, "tool", "west region opened")                   # 1 of 3
    hits = store.search_archive(sid, "east revenue forecast")
    assert [h.turn for h in hits] == [1, 2]


def test_stop_words_do_not_drown_the_meaningful_word(store_and_session):
    store, session = store_and_session
    sid = str(session.pk)
    store.archive(sid, 1, "tool", "churn was 7.5% in March")
    for turn in range(2, 12):
        store.archive(sid, turn, "assistant", f"what was the plan for step {turn}")
    assert store.search_archive(sid, "what was the churn")[0].turn == 1


def test_text_the_database_cannot_hold_is_kept_losslessly(store_and_session):
    store, session = store_and_session
    sid = str(session.pk)
    text = "header\x00binary-ish payload with ratio_value 42"
    ref = store.archive(sid, 1, "tool", text)
    import base64
    assert base64.b64decode(store.read_ref(sid, ref)).decode("utf-8") == text
    assert store.search_archive(sid, "ratio_value")[0].ref == ref


def test_search_beyond_the_recent_window(store_and_session, monkeypatch):
    """Old rows, dense words and partial matches, with a window small enough to matter."""
    monkeypatch.setattr(search, "RECENT_WINDOW", 5)
    store, session = store_and_session
    sid = str(session.pk)
    store.archive(sid, 1, "tool", "common alpha rareword")
    store.archive(sid, 2, "tool", "common beta partialword")
    for turn in range(3, 40):
        store.archive(sid, turn, "tool", f"common filler {turn}")
    assert [h.turn for h in store.search_archive(sid, "rareword common")][:1] == [1]
    assert store.search_archive(sid, "rareword")[0].turn == 1
    hits = store.search_archive(sid, "rareword partialword", limit=2)
    assert sorted(h.turn for h in hits) == [1, 2]
    assert len(store.search_archive(sid, "common", limit=5)) == 5


def test_recall_benchmark_reports_latency_and_cleans_up(make_session):
    before = Session.objects.count()
    result = recall_bench.measure(n=600)
    assert result["rows"] == 600 and result["queries"] == 50
    assert result["queries_with_hits"] == 50  # every query is built from archived text
    assert 0 < result["p50_ms"] <= result["p95_ms"] <= result["max_ms"]
    assert result["vendor"] in {"sqlite", "postgresql"}
    assert Session.objects.count() == before and ArchivedTurn.objects.count() == 0


def test_recall_benchmark_refuses_tiny_runs(db):
    with pytest.raises(ValueError, match="at least 100"):
        recall_bench.measure(n=10)
