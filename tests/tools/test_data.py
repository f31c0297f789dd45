"""CSV data tools (feature T5): exact outputs, missing values, errors."""
from __future__ import annotations

import csv

import pytest

from agents.scenarios import DATA_DIR

SMALL = ("region,quarter,revenue,units\n"
         "East,Q1,100,10\nEast,Q2,,12\nWest,Q1,80.5,NA\nWest,Q2,120,9\nNorth,Q1,60,5\n"
         ",Q2,40,4\n")


@pytest.fixture
def small(workspace):
    (workspace / "small.csv").write_text(SMALL)
    return "small.csv"


def test_describe_reports_types_ranges_and_missing_values(call, small):
    outcome = call("csv_describe", path=small)
    assert outcome.content == (
        "small.csv: 6 rows, 4 columns\n"
        "- region: text, 3 distinct, most common East (2), West (2), North (1); missing: 1 of 6 (16.7%)\n"
        "- quarter: text, 2 distinct, most common Q1 (3), Q2 (3); missing: 0 of 6 (0.0%)\n"
        "- revenue: numeric, min 40, max 120, mean 80.1; missing: 1 of 6 (16.7%)\n"
        "- units: numeric, min 4, max 12, mean 8; missing: 1 of 6 (16.7%)\n"
        "Missing values in total: 3 of 24 cells (12.5%), in region (1), revenue (1), units (1).")
    assert outcome.conclusions == ["small.csv: region missing: 1 of 6 (16.7%)",
                                   "small.csv: revenue missing: 1 of 6 (16.7%)",
                                   "small.csv: units missing: 1 of 6 (16.7%)"]


def test_group_aggregate_each_function(call, small):
    assert call("csv_group_aggregate", path=small, by="region", column="revenue").content == (
        "sum of revenue by region in small.csv: 4 groups; revenue missing: 1 of 6 (16.7%), "
        "those rows skipped.\n"
        "region,sum_revenue,rows\nEast,100,1\nNorth,60,1\nWest,200.5,2\n(missing),40,1")
    mean = call("csv_group_aggregate", path=small, by="quarter", column="revenue", agg="mean")
    assert mean.content.endswith("quarter,mean_revenue,rows\nQ1,80.17,3\nQ2,80,2")
    assert mean.conclusions == ["mean of revenue by quarter (small.csv): highest Q1 80.17, lowest Q2 80"]
    count = call("csv_group_aggregate", path=small, by="region, quarter", column="units", agg="count")
    assert count.content.split("\n")[1:] == [
        "region,quarter,count_units,rows", "East,Q1,1,1", "East,Q2,1,1", "North,Q1,1,1",
        "West,Q1,0,0", "West,Q2,1,1", "(missing),Q2,1,1"]
    low = call("csv_group_aggregate", path=small, by="quarter", column="units", agg="min")
    high = call("csv_group_aggregate", path=small, by="quarter", column="units", agg="max")
    assert low.content.endswith("Q1,5,2\nQ2,4,3") and high.content.endswith("Q1,10,2\nQ2,12,3")


def test_top_k_overall_and_per_group(call, small):
    assert call("csv_top_k", path=small, column="revenue", k=2).content == (
        "Top 2 rows of small.csv by revenue: 2 rows; revenue missing: 1 of 6 (16.7%) or not "
        "numeric, those rows skipped.\n"
        "rank,region,quarter,revenue,units\n1,West,Q2,120,9\n2,East,Q1,100,10")
    per_quarter = call("csv_top_k", path=small, column="units", k=1, by="quarter")
    assert per_quarter.content.split("\n")[1:] == [
        "rank,region,quarter,revenue,units", "1,East,Q1,100,10", "1,East,Q2,,12"]


def test_data_tool_errors(call, small, workspace):
    assert call("csv_group_aggregate", path=small, by="country", column="revenue").error == (
        "No column 'country' in small.csv; its columns are: region, quarter, revenue, units.")
    assert call("csv_group_aggregate", path=small, by="quarter", column="region").error == (
        "Column 'region' is not numeric (it holds 'East'); only agg='count' works on it.")
    assert call("csv_group_aggregate", path=small, by="quarter", column="units",
                agg="median").error.startswith("Argument 'agg' of csv_group_aggregate must be one of")
    assert call("csv_top_k", path=small, column="region").error == (
        "Column 'region' of small.csv has no numeric values; top-k ranks rows by a numeric column.")
    assert call("csv_top_k", path=small, column="revenue", k=0).error == "k must be at least 1 (got 0)."
    (workspace / "empty.csv").write_text("")
    assert call("csv_describe", path="empty.csv").error == \
        "'empty.csv' is empty: a CSV file needs a header line."
    (workspace / "latin.csv").write_bytes("stadt,wert\nKöln,1\n".encode("latin-1"))
    assert call("csv_describe", path="latin.csv").error == \
        "'latin.csv' is not UTF-8 text (a binary file, or text in another encoding); the CSV " \
        "tools read UTF-8 only."


def test_bundled_sales_data_has_what_the_scenario_needs():
    with (DATA_DIR / "sales.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert 300 <= len(rows) <= 600
    assert len({r["region"] for r in rows}) >= 4
    assert {(r["year"], r["quarter"]) for r in rows} >= {
        (y, f"Q{q}") for y in ("2025", "2026") for q in range(1, 5)}
    assert {"product", "revenue", "units", "cost"} <= set(rows[0])
    assert sum(1 for r in rows for c in ("revenue", "units", "cost") if r[c] == "") >= 3


def test_describe_of_the_sales_data_reports_its_missing_share(call, sales_ctx):
    outcome = call("csv_describe", path="sales.csv")
    assert "- revenue: numeric, min 37711.44, max 164777.2, mean 78675.09; missing: 4 of 460 (0.9%)" \
        in outcome.content
    assert "sales.csv: revenue missing: 4 of 460 (0.9%)" in outcome.conclusions
