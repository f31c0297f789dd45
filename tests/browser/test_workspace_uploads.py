"""The person's files through the real form in Chromium (feature T9): one file, several and
a zip on the start form, a refused one with its reason by the field and no session made,
files added to a finished session, a preview, and downloads of one file and of the whole
workspace. The stack runs with small limits so a refusal needs no big file."""
from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack, running_stack, wait_for
from .test_drawer_live import count_events, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

CSV = b"region,revenue\nNorth,120\nSouth,80\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory, TASKOS_UPLOAD_MAX_FILE_MB="0.05")  # 51 KB


def payload(name: str, data: bytes, mime: str = "text/plain") -> dict:
    return {"name": name, "mimeType": mime, "buffer": data}


def a_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


def start_with_files(page: Page, stack: Stack, goal: str, files: list[dict]) -> None:
    page.goto(stack.url("/sessions/new"))
    page.fill("#id_goal", goal)
    page.set_input_files("#id_files", files)
    page.click("button:has-text('Start')")


def finished_pk(page: Page) -> int:
    """Wait for the session to finish, then load its page again. The workspace listing is
    rendered with the page, not streamed: a page loaded before the worker put the demo data
    in (a quiet machine) lists only the person's files until it is reloaded."""
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.locator("#session-status .status")).to_have_text("finished")
    page.reload()
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def listed(page: Page) -> list[str]:
    return page.locator("#workspace tr[data-path]").evaluate_all(
        "rows => rows.map(r => r.dataset.path)")


def writer(page: Page, path: str) -> str:
    return page.locator(f'#workspace tr[data-path="{path}"] td.writer').inner_text()


def test_one_file_is_uploaded_listed_told_and_downloaded(page: Page, stack: Stack) -> None:
    start_with_files(page, stack, "Summarise my regions.", [payload("regions.csv", CSV)])
    pk = finished_pk(page)
    assert listed(page) == ["regions.csv", "sales.csv"]  # and the demo data
    assert writer(page, "regions.csv") == "you (ann), at the start"
    assert writer(page, "sales.csv") == "TaskOS demo data"
    hints = [json.loads(text) for (text,) in stack.query(
        "SELECT payload FROM runs_sessionevent WHERE session_id = ? AND type = 'HINT_BLOCK'",
        pk)]
    assert {"kind": "files", "text": "The person added 1 file to the workspace: regions.csv "
            f"({len(CSV)} bytes). Use list_files and read_file to look at them."} in hints
    with page.expect_download() as download:
        page.click('#workspace tr[data-path="regions.csv"] a:has-text("download")')
    assert download.value.suggested_filename == "regions.csv"
    assert open(download.value.path(), "rb").read() == CSV
    page.click('#workspace tr[data-path="regions.csv"] a:has-text("preview")')
    expect(page.locator("table.preview-table th")).to_have_text(["region", "revenue"])
    expect(page.locator("table.preview-table tbody tr")).to_have_count(2)


def test_several_files_and_a_zip_then_the_whole_workspace_downloads(page: Page,
                                                                   stack: Stack) -> None:
    start_with_files(page, stack, "Read my brief and data.", [
        payload("brief.txt", b"Write a one-line report."), payload("q1.csv", CSV),
        payload("more.zip", a_zip({"archive/q2.csv": CSV, "archive/notes.md": b"# notes"}),
                "application/zip")])
    finished_pk(page)
    assert listed(page) == ["archive/notes.md", "archive/q2.csv", "brief.txt", "q1.csv",
                            "sales.csv"]
    with page.expect_download() as download:
        page.click("#workspace a:has-text('Download all')")
    bundle = zipfile.ZipFile(download.value.path())
    assert sorted(bundle.namelist()) == ["archive/notes.md", "archive/q2.csv", "brief.txt",
                                         "q1.csv", "sales.csv"]
    assert bundle.read("archive/q2.csv") == CSV


def test_a_refused_upload_says_why_by_the_field_and_starts_nothing(page: Page,
                                                                  stack: Stack) -> None:
    before = stack.scalar("SELECT COUNT(*) FROM runs_session")
    start_with_files(page, stack, "Too much.", [payload("ok.csv", CSV),
                                                payload("huge.csv", b"x" * 60_000)])
    error = page.locator(".field.has-error .field-error")
    expect(error).to_have_text("'huge.csv' is 58.6 KB; one file may be at most 51.2 KB.")
    expect(page.locator("#id_goal")).to_have_value("Too much.")  # the rest of the form kept
    assert stack.scalar("SELECT COUNT(*) FROM runs_session") == before
    start_with_files(page, stack, "A bad zip.", [
        payload("bad.zip", a_zip({"../escape.txt": b"x"}), "application/zip")])
    expect(error).to_have_text("'bad.zip: ../escape.txt': the path holds '..', which would "
                               "leave the workspace; only paths inside it are taken.")
    assert stack.scalar("SELECT COUNT(*) FROM runs_session") == before


def test_files_added_to_a_finished_session_and_a_refusal_there(page: Page, stack: Stack) -> None:
    start_with_files(page, stack, "Start small.", [payload("first.csv", CSV)])
    pk = finished_pk(page)
    page.set_input_files("#workspace input[type=file]", [payload("later.txt", b"more"),
                                                         payload("empty.txt", b"")])
    page.click("#workspace button:has-text('Upload')")
    page.wait_for_url(re.compile(rf"/sessions/{pk}/#workspace$"))
    expect(page.locator("div.messages .flash-ok")).to_contain_text(
        "Added 2 files to the workspace: later.txt, empty.txt. Empty (0 bytes), kept as "
        "empty files: empty.txt.")
    assert "later.txt" in listed(page) and writer(page, "later.txt").startswith("you (ann)")
    expect(page.locator('#workspace tr[data-path="empty.txt"] .tag')).to_have_text("empty")
    page.set_input_files("#workspace input[type=file]", [payload("first.csv", b"again")])
    page.click("#workspace button:has-text('Upload')")
    expect(page.locator("#workspace .field-error")).to_have_text(
        "'first.csv' is already in the workspace; rename the file and upload again (nothing "
        "in the workspace is replaced).")
    expect(page.locator(".flash-error")).to_have_text(
        "Nothing was uploaded: the workspace is as it was.")
    # A new task from this workspace carries every file over.
    page.goto(stack.url(f"/sessions/{pk}/"))
    page.click("#workspace a:has-text('Start a new task from this workspace')")
    expect(page.locator(".copy-from")).to_contain_text(f"#{pk}")
    page.fill("#id_goal", "Go on from there.")
    page.click("button:has-text('Start')")
    finished_pk(page)
    assert listed(page) == ["empty.txt", "first.csv", "later.txt", "sales.csv"]
    assert writer(page, "first.csv") == "you (ann), at the start"


def test_a_file_added_mid_run_is_named_to_the_agent_on_its_next_turn(page: Page,
                                                                   stack: Stack) -> None:
    pk = start_session(page, stack, "sales-report", window=32000)  # the worker is paused
    stack.resume("worker")
    wait_for(lambda: count_events(stack, pk, "MODEL_CALL") >= 2, "two model calls")
    with stack.worker_held():
        expect(page.locator("#session-status .status")).to_have_text("running")
        page.set_input_files("#workspace input[type=file]", [payload("late.csv", CSV)])
        page.click("#workspace button:has-text('Upload')")
        expect(page.locator("div.messages .flash-ok")).to_contain_text(
            "Added 1 file to the workspace: late.csv. The agent is told on its next turn.")
        asked_at = int(stack.scalar("SELECT max(turn) FROM runs_sessionevent WHERE "
                                    "session_id = ?", pk))
    expect(page.locator("#session-status .status")).to_have_text("finished")
    [(turn, text)] = [(turn, json.loads(payload)["text"]) for turn, payload in stack.query(
        "SELECT turn, payload FROM runs_sessionevent WHERE session_id = ? AND type = "
        "'HINT_BLOCK' AND payload LIKE '%\"files\"%'", pk)]
    assert text == (f"The person added 1 file to the workspace: late.csv ({len(CSV)} bytes). "
                    "Use list_files and read_file to look at them.")
    assert asked_at <= turn <= asked_at + 1  # the turn after the upload, or the one in flight
    assert stack.scalar("SELECT announced_turn FROM runs_workspacefile WHERE session_id = ? "
                        "AND path = 'late.csv'", pk) == turn
