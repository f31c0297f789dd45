"""No tool reaches a file outside the workspace through a hard link or a swapped name
(issue 25 item 5): every workspace file is opened without following links and refused when
it has more than one name, for reading and for writing, with a clear error the session goes
on after."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

import agents.tools.sql as sql_tool
from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.scenarios import parse_scenario
from agents.sim.transport import sim_http_client
from agents.store.memory import MemoryStore
from agents.tools import workspace as workspace_tools

NEVER = "the tools use only real files inside the workspace, never through a link."
HARD = ("'{}' is a hard link (one file with 2 names, another may be outside the workspace); "
        + NEVER)
SQL_REFUSED = ("{} in the workspace is a link or not a regular file; the SQL tools only use a "
               "real file inside the workspace. Remove it, then load the CSV again.")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.csv"
    secret.write_text("name,value\ntop secret,1\n")
    return secret


def _secret_db(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE secrets (v TEXT)")
        db.execute("INSERT INTO secrets VALUES ('top secret')")
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("tool, args", [
    ("read_file", {}),
    ("write_file", {"content": "overwritten"}),
    ("write_file", {"content": "more", "append": True}),
    ("csv_describe", {}),
    ("csv_group_aggregate", {"by": "name", "column": "value"}),
    ("csv_top_k", {"column": "value"}),
    ("csv_load", {}),
    ("fetch_document", {"tokens": 50, "topic": "x"}),
])
def test_a_hard_link_to_an_outside_file_is_refused_by_every_file_tool(
        call, store, workspace, outside, tool, args):
    os.link(outside, workspace / "linked.csv")
    before = outside.read_bytes()
    name = "save_as" if tool == "fetch_document" else "path"
    outcome = call(tool, **{name: "linked.csv"}, **args)
    assert outcome.error == HARD.format("linked.csv")
    assert "top secret" not in outcome.content
    assert "top secret" not in store.read_ref("s1", outcome.ref)
    assert outside.read_bytes() == before  # a write neither truncated nor appended to it
    assert not (workspace / "session.sqlite3").exists()


def test_a_hard_link_in_a_sub_folder_is_refused_and_not_listed(call, workspace, outside):
    (workspace / "data").mkdir()
    os.link(outside, workspace / "data" / "linked.csv")
    (workspace / "data" / "own.csv").write_text("a\n1\n")
    assert call("read_file", path="data/linked.csv").error == HARD.format("data/linked.csv")
    assert call("list_files").content == (
        f"1 file under '.':\npath,bytes\ndata/own.csv,4\n"
        f"Not listed, links or not regular files: data/linked.csv; {NEVER}")


@pytest.mark.parametrize("name", ["session.sqlite3", "session.sqlite3-journal",
                                  "session.sqlite3-wal"])
def test_a_hard_linked_session_database_is_refused_for_reads_and_writes(
        call, workspace, tmp_path, name):
    outside = tmp_path / "outside.sqlite3"
    before = _secret_db(outside)
    if name != "session.sqlite3":  # a journal SQLite would roll back from, or write into
        (workspace / "session.sqlite3").write_bytes(before)
    os.link(outside, workspace / name)
    (workspace / "small.csv").write_text("region,revenue\nEast,1\n")
    load = call("csv_load", path="small.csv")
    query = call("sql_query", sql="SELECT v FROM secrets")
    for outcome in (load, query):
        assert outcome.error == SQL_REFUSED.format(name)
    assert "top secret" not in query.content
    assert outside.read_bytes() == before


def test_a_database_swapped_for_a_hard_link_after_the_check_is_refused(
        call, workspace, tmp_path, monkeypatch):
    """SQLite opens by name: a link swapped in between the check and SQLite's open is
    caught by looking at the name again once SQLite has opened it."""
    (workspace / "small.csv").write_text("region,revenue\nEast,1\n")
    assert call("csv_load", path="small.csv").error is None
    own = (workspace / "session.sqlite3").read_bytes()
    outside = tmp_path / "outside.sqlite3"
    before = _secret_db(outside)
    connect = sqlite3.connect

    def swap_then_connect(*args, **kwargs):
        (workspace / "session.sqlite3").unlink()
        os.link(outside, workspace / "session.sqlite3")
        return connect(*args, **kwargs)

    monkeypatch.setattr(sql_tool.sqlite3, "connect", swap_then_connect)
    for tool, args in (("sql_query", {"sql": "SELECT v FROM secrets"}),
                       ("csv_load", {"path": "small.csv", "table": "secrets"})):
        (workspace / "session.sqlite3").unlink()
        (workspace / "session.sqlite3").write_bytes(own)  # a real file when it is checked
        outcome = call(tool, **args)
        assert outcome.error == SQL_REFUSED.format("session.sqlite3")
        assert "top secret" not in outcome.content
        assert outside.read_bytes() == before  # csv_load neither dropped nor wrote a table


def test_a_name_swapped_for_a_link_after_listing_is_refused_when_opened(
        call, workspace, outside, monkeypatch):
    """The checks are made on the descriptor that is read, so what a name was when the
    model saw it does not matter: a swap just before the open is refused, not followed."""
    (workspace / "report.csv").write_text("name,value\nmine,2\n")
    assert "report.csv" in call("list_files").content
    opened = os.open

    def swap_then_open(path, flags, *args, **kwargs):
        if path == "report.csv" and kwargs.get("dir_fd") is not None:
            os.unlink(workspace / "report.csv")
            os.link(outside, workspace / "report.csv")
        return opened(path, flags, *args, **kwargs)

    monkeypatch.setattr(workspace_tools.os, "open", swap_then_open)
    outcome = call("read_file", path="report.csv")
    assert outcome.error == HARD.format("report.csv")
    assert "top secret" not in outcome.content


def test_a_fifo_is_refused_without_waiting_for_a_writer(call, workspace):
    os.mkfifo(workspace / "pipe.csv")
    never = f"'pipe.csv' is not a regular file; {NEVER}"
    assert call("read_file", path="pipe.csv").error == never
    assert call("csv_describe", path="pipe.csv").error == never
    assert call("write_file", path="pipe.csv", content="x").error == never


def test_a_file_the_model_writes_can_be_rewritten_and_read_back(call, workspace):
    assert call("write_file", path="out/report.md", content="long first text\n").error is None
    assert call("write_file", path="out/report.md", content="short\n").error is None
    assert call("read_file", path="out/report.md").content == "short\n"
    assert call("write_file", path="out/report.md", content="more\n", append=True).error is None
    assert (workspace / "out" / "report.md").read_text() == "short\nmore\n"
    assert call("write_file", path="out/report.md/x", content="x").error == \
        "'out/report.md' is a file, not a folder, so 'out/report.md/x' cannot be in it."
    assert call("read_file", path="out/../out/./report.md").content == "short\nmore\n"


def test_the_session_goes_on_after_a_refused_link(tmp_path, outside):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.link(outside, workspace / "linked.csv")
    scenario = parse_scenario({"name": "links", "goal": "read the linked file", "steps": [
        {"tool": "read_file", "args": {"path": "linked.csv"}},
        {"tool": "write_file", "args": {"path": "linked.csv", "content": "x"}},
        {"final": "The file is a link, so I could not use it."}]})
    client, _ = sim_http_client(scenario, 32_000)
    sink = ListSink()
    run = run_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                       profile=ModelProfile(name="sim", context_size=32_000),
                                       config=ContextConfig()),
                      session_id="t1", store=MemoryStore(), events=sink, workspace=workspace,
                      http_client=client)
    assert run.status == "finished"
    errors = [e.payload["error"] for e in sink.of_type("TOOL_RESULT")]
    assert errors == [HARD.format("linked.csv")] * 2
    assert outside.read_text() == "name,value\ntop secret,1\n"


def test_preparing_a_workspace_never_writes_through_a_link_left_in_it(tmp_path):
    # A dangling link named like a data file: "not exists()" followed it and the copy
    # created the file at the link's target, outside the workspace.
    from agents.loop.spec import prepare_workspace
    from agents.scenarios import DATA_DIR
    data = next(item for item in DATA_DIR.iterdir() if item.is_file())
    workspace, target = tmp_path / "ws", tmp_path / "outside" / "planted.csv"
    workspace.mkdir()
    target.parent.mkdir()
    (workspace / data.name).symlink_to(target)
    prepare_workspace(workspace)
    assert not target.exists()
    assert (workspace / data.name).is_symlink()
