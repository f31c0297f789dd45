"""Bounds enforced while reading (issue 25 item 6): the CSV tools stream their file with
running figures, and sql_query cuts long values and stops rows as it reads them.

Memory is measured with tracemalloc, which counts allocations, not time: the bounds hold on
a busy machine. scripts/bench_tool_bounds.py gives the figures at the 50 MB cap.
"""
from __future__ import annotations

import random
import statistics
import tracemalloc
from pathlib import Path

import pytest

from agents.tools import data, sql

ROWS = 20_000  # about 1.1 MB of CSV; read whole as before, it took about 17 MB


def _write_sales(path: Path, rows: int = ROWS) -> None:
    rng = random.Random(25)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write("order_id,region,product,quarter,revenue,units,cost,note\n")
        for i in range(rows):
            revenue = "" if i % 97 == 0 else f"{rng.uniform(10, 5000):.2f}"
            handle.write(f"ORD-{i:08d},{rng.choice('NSEW')},P{rng.randrange(400)},"
                         f"Q{rng.randrange(1, 5)},{revenue},{rng.randrange(1, 90)},"
                         f"{rng.uniform(5, 3000):.2f},ref {rng.randrange(10**9)}\n")


def _peak(func, **args):
    tracemalloc.start()
    try:
        value = func(**args)
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def big(workspace) -> str:
    _write_sales(workspace / "big.csv")
    return "big.csv"


@pytest.mark.parametrize("tool, args", [
    (data.csv_describe, {}),
    (data.csv_group_aggregate, {"by": "region", "column": "revenue", "agg": "mean"}),
    (data.csv_top_k, {"column": "revenue", "k": 5}),
    (sql.csv_load, {}),
])
def test_the_csv_tools_read_a_file_in_bounded_memory(ctx, big, monkeypatch, tool, args):
    # What describe keeps grows with the distinct values it counts, up to their cap (10 000
    # a column at most): a lower cap here shows the rest does not grow with the file.
    monkeypatch.setattr("agents.tools.tabular.MAX_DISTINCT", 1000, raising=False)
    _, peak = _peak(tool, path=big, _ctx=ctx, **args)
    assert peak < 2_000_000, f"{tool.__name__} peaked at {peak:,} bytes"


def test_describe_streams_to_the_same_figures(call, big, workspace):
    outcome = call("csv_describe", path=big)
    lines = outcome.content.split("\n")
    assert lines[0] == f"big.csv: {ROWS} rows, 8 columns"
    assert lines[1] == ("- order_id: text, more than 10000 distinct (only the first 10000 "
                        "counted), most common ORD-00000000 (1), ORD-00000001 (1), ORD-00000002 "
                        "(1); missing: 0 of 20000 (0.0%)")
    assert lines[2].startswith("- region: text, 4 distinct, most common ")
    cells = [line.split(",")[4] for line in (workspace / big).read_text().splitlines()[1:]]
    revenue = [float(cell) for cell in cells if cell]
    missing = len(cells) - len(revenue)
    assert missing == 207
    assert lines[5] == (f"- revenue: numeric, min {min(revenue):g}, max {max(revenue):g}, "
                        f"mean {sum(revenue) / len(revenue):.2f}; missing: 207 of 20000 (1.0%)")
    assert lines[-1] == ("Missing values in total: 207 of 160000 cells (0.1%), in "
                         "revenue (207).")


def test_distinct_values_are_counted_up_to_a_cap_shared_by_the_columns(call, workspace):
    header = ",".join(f"c{i}" for i in range(400))  # 100 000 / 400 = 250 counted per column
    rows = "\n".join(",".join(f"v{r}" for _ in range(400)) for r in range(300))
    (workspace / "wide.csv").write_text(f"{header}\n{rows}\n")
    lines = call("csv_describe", path="wide.csv").content.split("\n")
    assert lines[1] == ("- c0: text, more than 250 distinct (only the first 250 counted), most "
                        "common v0 (1), v1 (1), v2 (1); missing: 0 of 300 (0.0%)")


def test_long_values_stay_distinct_and_show_their_head(call, workspace):
    head = "x" * 150
    (workspace / "long.csv").write_text(f"text\n{head}a\n{head}b\n{head}a\n")
    assert call("csv_describe", path="long.csv").content.split("\n")[1] == (
        f"- text: text, 2 distinct, most common {'x' * 40} (2), {'x' * 40} (1); "
        "missing: 0 of 3 (0.0%)")


def test_lines_and_columns_past_the_caps_are_refused(call, workspace):
    (workspace / "long.csv").write_text("a,b\n" + "1," * 600_000 + "\n")
    assert call("csv_describe", path="long.csv").error == (
        "Line 2 of 'long.csv' is longer than 1,000,000 characters; the CSV tools read shorter "
        "lines only.")
    (workspace / "wide.csv").write_text(",".join(f"c{i}" for i in range(2001)) + "\n")
    assert call("csv_load", path="wide.csv").error == \
        "'wide.csv' has 2001 columns; the CSV tools read at most 2000."
    assert call("csv_top_k", path="long.csv", column="a", k=1001).error == (
        "k must be at most 1000 (got 1001); for more rows load the CSV with csv_load and use "
        "sql_query.")


def test_streamed_aggregates_equal_those_over_all_values(call, workspace):
    values = [0.1] * 10 + [1e16, 3.3, -1e16, 2.5]  # a running float sum would lose the 0.1s
    (workspace / "v.csv").write_text("g,v\n" + "".join(f"a,{v!r}\n" for v in values))
    mean = call("csv_group_aggregate", path="v.csv", by="g", column="v", agg="mean")
    assert mean.content.split("\n")[-1] == f"a,{round(statistics.fmean(values), 2)},14"
    rows = "".join(f"{i % 3},{v}\n" for i, v in enumerate([5, 9, 9, 1, 9, 7, 5, 5]))
    (workspace / "t.csv").write_text("g,v\n" + rows)
    assert call("csv_top_k", path="t.csv", column="v", k=3).content.split("\n")[2:] == [
        "1,1,9", "2,2,9", "3,1,9"]  # ties keep file order, as a sort of every row did


# --- sql_query: a row of 200 long values used to be kept whole (20 MB archived)
WIDE = "SELECT " + ", ".join(f"printf('%.*c', 99000, 'x') AS c{i}" for i in range(200))


@pytest.fixture
def database(ctx, workspace) -> None:
    (workspace / "small.csv").write_text("a\n1\n")
    sql.csv_load("small.csv", _ctx=ctx)


def test_a_wide_row_is_cut_while_it_is_read(call, store, database, ctx):
    outcome = call("sql_query", sql=WIDE)
    assert outcome.error is None
    archived = store.read_ref("s1", outcome.ref)
    assert len(archived) < 250_000  # 200 values of 500 bytes and their markers
    assert archived.startswith("1 rows.\nc0,c1,")
    assert f"{'x' * 500} [... 98,500 more bytes cut]" in archived
    assert archived.endswith("200 long values cut to 500 bytes (with 200 columns, a row keeps "
                             "at most 100,000); select substr() of a column for the rest.")
    table, peak = _peak(sql.sql_query, sql=WIDE, _ctx=ctx)
    assert peak < 4_000_000, f"the wide row peaked at {peak:,} bytes"  # whole: 20 MB
    assert all(len(value) < 600 for value in table.rows[0])


def test_rows_stop_before_the_result_cap_and_say_so(call, database):
    outcome = call("sql_query", sql=(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) "
        "SELECT " + ", ".join(f"printf('%.*c', 99000, 'y') AS c{i}" for i in range(20))
        + " FROM n"))
    # 20 values of 5 000 bytes a row: 19 rows fit in 2 MB, the 20th would pass it
    assert outcome.content.startswith("19 rows (stopped at 2,000,000 bytes of values; the query "
                                      "returns more — add a LIMIT or aggregate).")


def test_blobs_are_cut_too(call, store, database):
    outcome = call("sql_query", sql="SELECT " + ", ".join(
        f"zeroblob(5000) AS b{i}" for i in range(100)))
    assert outcome.error is None
    assert len(store.read_ref("s1", outcome.ref)) < 200_000
    assert "100 long values cut to 1,000 bytes" in store.read_ref("s1", outcome.ref)
