"""csv_load writes the session database; sql_query can only read it (feature T5)."""
from __future__ import annotations

import sqlite3

import pytest

READ_ONLY = ("sql_query is read-only: the query tried to change the database, which is refused.")


@pytest.fixture
def loaded(call, workspace):
    (workspace / "small.csv").write_text("region,revenue,units\nEast,100.5,10\nWest,,12\nNorth,60,5\n")
    outcome = call("csv_load", path="small.csv")
    assert outcome.content == (
        "Loaded 3 rows from small.csv into table small of session.sqlite3 (missing values stored "
        "as NULL). Columns: region TEXT, revenue REAL, units INTEGER.")
    return workspace / "session.sqlite3"


def test_select_returns_a_table(call, loaded):
    assert call("sql_query", sql="SELECT region, revenue FROM small ORDER BY region").content == \
        "3 rows.\nregion,revenue\nEast,100.5\nNorth,60.0\nWest,"
    assert call("sql_query", sql="-- total\nWITH t AS (SELECT SUM(units) AS u FROM small) "
                                 "SELECT u FROM t").content == "1 rows.\nu\n27"


@pytest.mark.parametrize("sql, keyword", [
    ("INSERT INTO small VALUES ('x', 1, 1)", "INSERT"),
    ("delete from small", "DELETE"),
    ("DROP TABLE small", "DROP"),
    ("ATTACH DATABASE 'x.db' AS x", "ATTACH"),
    ("PRAGMA query_only = OFF", "PRAGMA"),
    ("/* sneaky */ UPDATE small SET units = 0", "UPDATE"),
])
def test_writes_are_refused_by_keyword(call, loaded, sql, keyword):
    assert call("sql_query", sql=sql).error == (
        f"sql_query is read-only: only SELECT or WITH queries are allowed (got '{keyword}'). "
        "To add data, load a CSV with csv_load.")


@pytest.mark.parametrize("sql", [
    "WITH x AS (SELECT 1) DELETE FROM small",
    "WITH x AS (SELECT 1) INSERT INTO small SELECT * FROM small",
])
def test_writes_hidden_behind_with_are_refused_by_the_database(call, loaded, sql):
    assert call("sql_query", sql=sql).error == READ_ONLY
    with sqlite3.connect(loaded) as db:
        assert db.execute("SELECT COUNT(*) FROM small").fetchone() == (3,)


def test_several_statements_and_sql_errors(call, loaded):
    assert call("sql_query", sql="SELECT 1; DELETE FROM small").error == (
        "sql_query runs one statement at a time; send a single SELECT.")
    assert call("sql_query", sql="SELECT nope FROM small").error == "SQL error: no such column: nope."


def test_row_limit(call, loaded):
    outcome = call("sql_query", sql="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                                    "WHERE i < 5000) SELECT i FROM n")
    assert outcome.content.startswith(
        "1000 rows (stopped after 1000; the query returns more — add a LIMIT or aggregate).\ni\n1\n2\n")
    assert outcome.truncated and len(outcome.content) <= 8000
    assert "[... 950 rows offloaded to" in outcome.content


def test_no_database_yet(call):
    assert call("sql_query", sql="SELECT 1").error == (
        "There is no session database yet (session.sqlite3). Load a CSV first, e.g. "
        "csv_load(path='sales.csv').")


def test_table_names_are_checked(call, workspace):
    (workspace / "2026 sales.csv").write_text("a,b\n1,2\n")
    assert "into table t_2026_sales of" in call("csv_load", path="2026 sales.csv").content
    assert call("csv_load", path="2026 sales.csv", table="x; DROP").error == (
        "Table name 'x; DROP' must start with a letter or _ and hold only letters, digits and _.")


def test_a_runaway_query_is_stopped(call, loaded, monkeypatch):
    monkeypatch.setattr("agents.tools.sql.QUERY_SECONDS", 0.0)
    outcome = call("sql_query", sql="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                                    "FROM n) SELECT MAX(i) FROM n")
    assert outcome.error == "The query ran longer than 0 s and was stopped; add a LIMIT or aggregate."


# --- issue 9 F9: the session database must be a real file inside the workspace
@pytest.mark.parametrize("link", ["session.sqlite3", "session.sqlite3-journal"])
def test_a_database_link_out_of_the_workspace_is_refused_for_reads_and_writes(
        call, workspace, tmp_path, link):
    outside = tmp_path / "outside.sqlite3"
    with sqlite3.connect(outside) as db:
        db.execute("CREATE TABLE secrets (v TEXT)")
        db.execute("INSERT INTO secrets VALUES ('top secret')")
    db.close()
    before = outside.read_bytes()
    (workspace / link).symlink_to(outside)
    (workspace / "small.csv").write_text("region,revenue\nEast,1\n")
    load = call("csv_load", path="small.csv")
    query = call("sql_query", sql="SELECT v FROM secrets")
    for outcome in (load, query):
        assert outcome.error and f"{link} in the workspace is a link" in outcome.error
    assert "top secret" not in query.content
    assert outside.read_bytes() == before  # nothing written through the link


# --- issue 9 F10: rows and bytes are capped while reading, before they pile up
def test_a_huge_value_is_refused_before_it_is_built(call, loaded):
    outcome = call("sql_query", sql="SELECT hex(zeroblob(50000000)) AS big")
    assert outcome.error and "longer than 100,000 bytes" in outcome.error


def test_results_stop_at_the_byte_cap(call, loaded, store):
    outcome = call("sql_query", sql=(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) "
        "SELECT i, printf('%.*c', 90000, 'y') AS filler FROM n"))
    assert outcome.error is None
    assert "stopped at 2,000,000 bytes of values" in outcome.content
    raw = store.read_ref("s1", outcome.ref) if outcome.ref else outcome.content
    assert len(raw) < 3_000_000  # 500 x 90 kB would be 45 MB
