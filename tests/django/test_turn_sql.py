"""The per-turn statements written as plain SQL (taskos/store/turn_sql.py) store exactly what
the ORM would, on the database the suite runs on (SQLite or PostgreSQL)."""
from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from taskos.runs import services
from taskos.runs.models import Anchor, ArchivedTurn, Session
from taskos.store import turn_sql
from taskos.store.search import search_archive
from taskos.worker.lease import Lease, LeaseLost

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(sim_profile):
    return services.create_session(None, "", "sales-report", sim_profile, None, {})


def test_an_anchor_is_inserted_and_updated_with_its_times(session):
    before = timezone.now()
    fields = {"tier": 1, "text": "报告不超过 120 字", "key": "limit:words", "source": "user",
              "active": True, "turn": 3}
    anchor_id = turn_sql.insert_anchor(session.pk, fields)
    row = Anchor.objects.get(pk=anchor_id)
    assert (row.session_id, row.tier, row.text, row.key, row.source, row.active, row.turn) == \
        (session.pk, 1, "报告不超过 120 字", "limit:words", "user", True, 3)
    assert before <= row.created_at == row.updated_at <= timezone.now()
    assert session.__class__.objects.get(pk=session.pk).person_edits == 0  # not a person

    created = row.created_at
    turn_sql.upsert_anchor(session.pk, anchor_id, {**fields, "active": False})
    row.refresh_from_db()
    assert row.active is False and row.updated_at >= row.created_at == created
    other = services.create_session(None, "", "sales-report", session.profile, None, {})
    turn_sql.upsert_anchor(other.pk, anchor_id, {**fields, "text": "其他"})  # not that session's
    row.refresh_from_db()
    assert (row.session_id, row.text) == (session.pk, "报告不超过 120 字")
    assert Anchor.objects.filter(pk=anchor_id).count() == 1


def test_an_anchor_a_person_deleted_is_written_again_under_its_id(session):
    fields = {"tier": 2, "text": "region A sales −12 %", "key": "", "source": "tool",
              "active": True, "turn": 1}
    anchor_id = turn_sql.insert_anchor(session.pk, fields)
    Anchor.objects.filter(pk=anchor_id).delete()
    turn_sql.upsert_anchor(session.pk, anchor_id, {**fields, "active": False})
    row = Anchor.objects.get(pk=anchor_id)
    assert (row.session_id, row.text, row.active) == (session.pk, "region A sales −12 %", False)


def test_rows_can_be_written_under_ids_reserved_ahead(session):
    """PostgreSQL's kept inserts (taskos/store/batch_writes.py) take their ids from the table's sequence beforehand
    (taskos/store/row_ids.py); elsewhere the database hands them out as before."""
    from django.db import connection

    from taskos.store.row_ids import RowIds
    ids = RowIds(ArchivedTurn._meta.db_table)
    reserved = [ids.next() for _ in range(3)]
    if connection.vendor != "postgresql":
        assert reserved == [None, None, None]
        return
    assert reserved == sorted(reserved) and len(set(reserved)) == 3
    row = {"turn": 1, "role": "tool", "content": "x", "tool_name": "", "tool_args": {},
           "token_count": 0, "is_binary": False, "search_text": "", "search_pending": True}
    assert turn_sql.insert_archived(session.pk, row, reserved[1]) == reserved[1]
    later = turn_sql.insert_archived(session.pk, row)  # the sequence's own next id
    assert later > reserved[-1]
    assert ArchivedTurn.objects.get(pk=reserved[1]).content == "x"


def test_an_archived_row_given_its_words_reads_back_and_is_found_by_search_at_once(session):
    row_id = turn_sql.insert_archived(session.pk, {
        "turn": 2, "role": "tool", "content": "华东地区收入 revenue 4821", "tool_name": "read_file",
        "tool_args": {"path": "销售.csv", "n": 2}, "token_count": 12, "is_binary": False,
        "search_text": "4821 revenue 华 东 地 区 收 入", "search_pending": None})
    row = ArchivedTurn.objects.get(pk=row_id)
    assert (row.session_id, row.turn, row.content, row.tool_args) == \
        (session.pk, 2, "华东地区收入 revenue 4821", {"path": "销售.csv", "n": 2})
    assert abs(row.created_at - timezone.now()) < dt.timedelta(minutes=1)
    hits = search_archive(session.pk, "收入 4821", 5)
    assert [h.ref for h in hits] == [row.ref]


def test_counters_add_up_and_keep_their_highest_figures(session):
    turn_sql.add_to_counters(session.pk, tokens=900, peak=600, turn=4, cost=0.5, compactions=0)
    turn_sql.add_to_counters(session.pk, tokens=300, peak=300, turn=2, cost=0.25, compactions=1)
    turn_sql.add_to_counters(session.pk, tokens=0, peak=0, turn=0, cost=0.0, compactions=1)
    row = Session.objects.get(pk=session.pk)
    assert (row.total_input_tokens, row.peak_input_tokens, row.turns, row.compactions) == \
        (1200, 600, 4, 2)
    assert row.cost == pytest.approx(0.75)


def test_the_poll_reads_every_request_in_one_row(session):
    assert turn_sql.poll(session.pk) == {"cancel_requested": False, "pending": False,
                                         "notes": {}, "person_edits": 0, "compact": False,
                                         "files": False}
    services.post_message(session, "也看看 2023 年")
    services.request_compaction(session, "keep the figures")
    Session.objects.filter(pk=session.pk).update(notes={"见解": ["收入 +12 %"]})
    polled = turn_sql.poll(session.pk)
    assert polled["pending"] and polled["compact"] and polled["notes"] == {"见解": ["收入 +12 %"]}
    assert not polled["files"]
    told = session.workspace_files.create(path="q1.csv", size=10, announced_turn=3)
    assert not turn_sql.poll(session.pk)["files"]  # told already
    told.pk = None
    told.announced_turn = None
    told.save()
    assert turn_sql.poll(session.pk)["files"]  # a person's file the agent was not told of
    assert turn_sql.poll(10 ** 9) is None
    assert turn_sql.person_edits(session.pk) == 0


def test_the_state_head_is_written_only_while_the_lease_is_ours(session):
    lease = Lease(session.pk, owner="worker-a")
    assert lease.take()
    assert turn_sql.save_head(session.pk, {"turn": 5, "note": "第五轮"}, lease)
    row = Session.objects.get(pk=session.pk)
    assert row.engine_state == {"turn": 5, "note": "第五轮"} and row.lease_expires > timezone.now()

    Session.objects.filter(pk=session.pk).update(lease_owner="worker-b")  # taken over
    assert not turn_sql.save_head(session.pk, {"turn": 6}, lease)
    with pytest.raises(LeaseLost):
        lease.fence(False)
    assert Session.objects.get(pk=session.pk).engine_state["turn"] == 5
    assert not turn_sql.save_head(10 ** 9, {"turn": 1})  # no such session
