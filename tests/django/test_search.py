"""Archive search specifics of DjangoStore: index kept in sync, ranking, the PostgreSQL
window path, and the recall benchmark helper."""
import pytest

from taskos.ops import recall_bench
from taskos.runs.models import ArchivedTurn, Session
from taskos.store import search
from taskos.store.django_store import DjangoStore

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


def test_text_the_database_cannot_hold_is_kept_with_visible_marks(store_and_session):
    # issue 25 item 4: one rule (agents/storable.py) instead of base64 text nobody can read
    store, session = store_and_session
    sid = str(session.pk)
    ref = store.archive(sid, 1, "tool", "header\x00binary-ish \ud800 payload with ratio_value 42")
    assert store.read_ref(sid, ref) == "header\u2400binary-ish \ufffd payload with ratio_value 42"
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


def _index_holds(row_id: int, word: str) -> bool:
    """Whether the database's own full-text index (not search_text) finds the row."""
    from django.db import connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT rowid FROM runs_archivedturn_fts WHERE "
                           "runs_archivedturn_fts MATCH %s", [f'search_text:"{word}"'])
        else:
            cursor.execute("SELECT id FROM runs_archivedturn WHERE search_vector @@ %s::tsquery",
                           [f"'{word}'"])
        return row_id in {row[0] for row in cursor.fetchall()}


def test_the_engines_rows_are_indexed_by_the_next_search_not_when_archived(store_and_session):
    """A turn archives without reading a result's words (issue 8); the first search of the
    session puts every row archived since into the index, and finds them at once."""
    store, session = store_and_session
    sid = str(session.pk)
    refs = [store.archive(sid, 1, "tool", "east region revenue 4821", tool_name="csv_query"),
            store.archive(sid, 2, "tool", "华东地区 收入 下降")]
    rows = list(ArchivedTurn.objects.filter(session=session).order_by("id"))
    assert [(r.search_text, r.search_pending) for r in rows] == [("", True), ("", True)]
    assert not _index_holds(rows[0].pk, "4821")
    assert [h.ref for h in store.search_archive(sid, "revenue 4821")] == [refs[0]]
    rows = list(ArchivedTurn.objects.filter(session=session).order_by("id"))
    assert all(r.search_pending is None for r in rows)
    assert "4821" in rows[0].search_text.split() and "csv_query" in rows[0].search_text.split()
    assert _index_holds(rows[0].pk, "4821") and _index_holds(rows[1].pk, "华")
    assert [h.ref for h in store.search_archive(sid, "华东")] == [refs[1]]
    assert search.index_pending(session.pk) == 0  # nothing left to index


def test_binary_rows_are_indexed_when_archived(store_and_session):
    store, session = store_and_session
    store.archive(str(session.pk), 1, "tool", "", tool_name="fetch_image", raw_bytes=b"\x89PNG")
    row = ArchivedTurn.objects.get(session=session)
    assert row.search_pending is None and row.search_text == "fetch_image"
    assert _index_holds(row.pk, "fetch_image")
