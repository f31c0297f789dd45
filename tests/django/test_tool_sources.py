"""Tool sources on the database (T10): a session using the example MCP server that ships
with TaskOS runs end to end on the simulated model, which calls the source's tools; a
source that cannot start leaves the session running on; only staff change sources, and a
person picks only the ones open to them."""
from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from taskos.drawer.base import render_panel
from taskos.drawer.events import load_events
from taskos.drawer.panels import BudgetPanel, CostPanel
from taskos.drawer.panels.inspector import read_call_detail
from taskos.replays.sessions import create_replay
from taskos.runs import queue, services
from taskos.runs.models import (ArchivedTurn, Session, SessionEvent, ToolSource,
                                ToolSourceTool)
from taskos.web.forms import NewSessionForm
from taskos.worker.execute import execute_session, execute_tree

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE = ["-m", "taskos.mcp_servers.workspace_tools"]


def example_source(**fields) -> ToolSource:
    fields.setdefault("command", sys.executable)
    fields.setdefault("args", EXAMPLE)
    return ToolSource.objects.create(name="workspace", start_timeout_s=180.0, **fields)


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("ann", password="ann-secret-42")


def start(owner, profile, source: ToolSource | None):
    session = services.create_session(owner, "", "workspace-tools", profile, None, {})
    if source is not None:
        session.tool_sources.add(source)
    execute_session(session)
    session.refresh_from_db()
    return session


def results_of(session, tool: str) -> list[str]:
    return list(ArchivedTurn.objects.filter(session=session, tool_name=tool)
                .exclude(role="approval").order_by("id").values_list("content", flat=True))


def test_a_session_calls_the_example_source_end_to_end(owner, sim_profile):
    source = example_source()
    ToolSourceTool.objects.create(source=source, tool_name="column_total",
                                  max_result_length=500)
    session = start(owner, sim_profile, source)
    assert session.status == "finished", session.error
    [total] = results_of(session, "workspace__column_total")
    assert total.startswith("revenue: total ") and "over 456 rows (4 empty" in total
    assert results_of(session, "workspace__calculate") == ["8.24"]
    # The source's tool schemas went out with the model's requests, beside the built-ins.
    started = SessionEvent.objects.get(session=session, type="SESSION_STARTED").payload
    assert not [w for w in started.get("warnings", []) if "tool source" in w]
    assert (session.workspace / "totals.md").is_file()
    # The drawer: the cost panel's tokens per source and per tool, the inspector's schemas
    # of the source apart from the built-ins'.
    panel = CostPanel()
    cost = panel.get_context(session, load_events(session, panel.event_types))
    by_source = {row["source"]: row for row in cost["source_rows"]}
    assert by_source["workspace"]["calls"] == 2 and by_source["workspace"]["kept"] > 0
    assert by_source["built-in"]["calls"] == 2
    assert {r["tool"] for r in cost["tool_rows"] if r["source"] == "workspace"} == \
        {"workspace__calculate", "workspace__column_total"}
    assert "Tools, by source" in render_panel(panel, session,
                                              load_events(session, panel.event_types))
    detail = read_call_detail(session, 1)
    assert "3 from workspace" in detail["tools_part"]["label"]
    assert sum(row["tokens"] for row in detail["tools_part"]["by_source"]) == \
        detail["tools_part"]["tokens"]
    # The budget panel's system zone: the same schemas per source, within the zone.
    budget_panel = BudgetPanel()
    budget = budget_panel.get_context(session, load_events(session, budget_panel.event_types))
    schemas = {row["source"]: row for row in budget["budget"]["schemas"]}
    assert set(schemas) == {"built-in", "workspace"} and schemas["workspace"]["schemas"] == 3
    assert schemas["workspace"]["tokens"] > 0
    system = next(seg for seg in budget["budget"]["segments"] if seg["zone"] == "system")
    assert sum(row["tokens"] for row in schemas.values()) < system["tokens"]
    html = render_panel(budget_panel, session, load_events(session, budget_panel.event_types))
    assert 'data-source="workspace"' in html and "tool schemas from workspace" in html
    # A replay (E2) offers the same sources, so its requests carry the same schemas.
    replay = create_replay(session, owner)
    assert list(replay.tool_sources.all()) == [source]
    execute_session(replay)
    replay.refresh_from_db()
    assert replay.status == "finished", replay.error
    replayed = budget_panel.get_context(replay, load_events(replay, budget_panel.event_types))
    assert replayed["budget"]["schemas"] == budget["budget"]["schemas"]


def test_a_session_without_sources_shows_no_schema_split(owner, sim_profile):
    session = start(owner, sim_profile, None)
    panel = BudgetPanel()
    context = panel.get_context(session, load_events(session, panel.event_types))
    assert context["budget"]["schemas"] == []
    assert "schema-source" not in render_panel(panel, session,
                                               load_events(session, panel.event_types))


def test_a_source_that_cannot_start_leaves_the_session_running_on(owner, sim_profile):
    source = example_source(command="/no/such/mcp-server", args=[])
    session = start(owner, sim_profile, source)
    assert session.status == "finished", session.error
    warnings = SessionEvent.objects.get(session=session, type="SESSION_STARTED") \
        .payload["warnings"]
    assert any("tool source 'workspace'" in w and "could not be started" in w
               for w in warnings), warnings
    [answer] = results_of(session, "workspace__column_total")
    assert answer.startswith("Unknown tool 'workspace__column_total'")


def test_to_engine_carries_the_defaults_overrides_and_ask_first():
    source = ToolSource.objects.create(name="crm", kind="http", url="http://crm.example/mcp",
                                       headers={"Authorization": "CRM_TOKEN"},
                                       max_result_length=900, ask_first=False)
    ToolSourceTool.objects.create(source=source, tool_name="delete_contact", ask_first=True,
                                  summary_mode="stats")
    spec = source.to_engine()
    assert spec.kind == "http" and spec.headers == {"Authorization": "CRM_TOKEN"}
    assert spec.boundary("find").max_result_length == 900
    assert spec.boundary("delete_contact").summary_mode == "stats"
    assert spec.asks_first("delete_contact") and not spec.asks_first("find")


@pytest.mark.parametrize("fields, field", [
    ({"name": "bad name!", "command": "python"}, "name"),
    ({"name": "ok", "command": ""}, "command"),
    ({"name": "ok", "kind": "http"}, "url"),
    ({"name": "ok", "command": "python", "env_allow": ["NOT A NAME"]}, "env_allow"),
    ({"name": "ok", "kind": "http", "url": "http://x/mcp", "headers": {"X": "$TOKEN"}},
     "headers"),
])
def test_a_misconfigured_source_is_refused_by_its_field(fields, field):
    with pytest.raises(ValidationError) as refused:
        ToolSource(**fields).full_clean()
    assert field in refused.value.message_dict


def test_a_person_picks_only_the_sources_open_to_them(owner, django_user_model):
    staff = django_user_model.objects.create_user("sam", password="sam-secret-42",
                                                  is_staff=True)
    mine = ToolSource.objects.create(name="mine", command="python")
    team = ToolSource.objects.create(name="team", command="python")
    ToolSource.objects.create(name="public", command="python", open_to_everyone=True)
    ToolSource.objects.create(name="closed", command="python")
    ToolSource.objects.create(name="off", command="python", open_to_everyone=True,
                              enabled=False)
    mine.allowed_users.add(owner)
    group = Group.objects.create(name="analysts")
    owner.groups.add(group)
    team.allowed_groups.add(group)
    names = sorted(ToolSource.objects.usable_by(owner).values_list("name", flat=True))
    assert names == ["mine", "public", "team"]
    assert "closed" in ToolSource.objects.usable_by(staff).values_list("name", flat=True)
    closed = ToolSource.objects.get(name="closed")
    form = NewSessionForm({"scenario": "workspace-tools", "tool_sources": [closed.pk]},
                          owner=owner)
    assert not form.is_valid() and "tool_sources" in form.errors


def test_the_start_form_records_the_picked_sources(client, owner, sim_profile, monkeypatch):
    monkeypatch.setattr(queue, "run_session", lambda pk: SimpleNamespace(id="queued"))
    source = ToolSource.objects.create(name="public", command="python", open_to_everyone=True)
    client.force_login(owner)
    page = client.get(reverse("web:new")).content.decode()
    assert 'name="tool_sources"' in page and "public" in page
    form = NewSessionForm(owner=owner)
    data = {name: field.initial for name, field in form.fields.items()
            if field.initial is not None and name not in ("tools", "ask_first")}
    data.update(scenario="workspace-tools", profile=sim_profile.pk, tool_sources=[source.pk])
    response = client.post(reverse("web:new"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(source.sessions.values_list("owner__username", flat=True)) == ["ann"]


def test_only_staff_reach_the_tool_source_admin(client, owner, django_user_model):
    add = reverse("admin:runs_toolsource_add")
    client.force_login(owner)
    assert client.get(add).status_code == 302  # to the admin's login: not staff
    admin = django_user_model.objects.create_superuser("root", password="root-secret-42")
    client.force_login(admin)
    assert client.get(add).status_code == 200
    response = client.post(add, {
        "name": "calc", "kind": "stdio", "command": sys.executable,
        "args": '["-m", "taskos.mcp_servers.workspace_tools"]', "env_allow": "[]",
        "url": "", "headers": "{}", "call_timeout_s": "30", "start_timeout_s": "60",
        "max_schema_tokens": "2000", "summary_mode": "", "enabled": "on",
        "tool_settings-TOTAL_FORMS": "1", "tool_settings-INITIAL_FORMS": "0",
        "tool_settings-0-tool_name": "calculate", "tool_settings-0-ask_first": "true",
        "tool_settings-0-summary_mode": ""})
    assert response.status_code == 302, response.content.decode()[:3000]
    source = ToolSource.objects.get(name="calc")
    assert source.to_engine().asks_first("calculate")


def test_an_ask_first_tool_of_a_source_waits_and_the_resumed_run_reconnects(
        owner, sim_profile, client, monkeypatch):
    """A source's tool marked ask-first (T11) stops the run without a worker; approved in
    the drawer, the next run starts the source's server again and the call runs."""
    monkeypatch.setattr(queue, "run_session", lambda pk: SimpleNamespace(id="queued"))
    source = example_source()
    ToolSourceTool.objects.create(source=source, tool_name="calculate", ask_first=True)
    session = start(owner, sim_profile, source)
    assert session.status == "waiting_for_approval", session.error
    [approval] = session.approvals.all()
    assert approval.tool == "workspace__calculate"
    assert results_of(session, "workspace__calculate") == []
    client.force_login(owner)
    answer = client.post(reverse("web:approval_decide", args=[session.pk, approval.pk]),
                         {"decision": "approve"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    execute_session(session)  # what the worker does with the message the approval sent
    session.refresh_from_db()
    assert session.status == "finished", session.error
    assert results_of(session, "workspace__calculate") == ["8.24"]


def test_runtask_offers_a_named_source_and_refuses_an_unknown_one(sim_profile, capsys):
    example_source()
    with pytest.raises(CommandError, match="no enabled tool source nope. Enabled sources: "
                                           "workspace"):
        call_command("runtask", scenario="workspace-tools", tool_source=["nope"])
    assert not Session.objects.exists()  # refused before any session
    call_command("runtask", scenario="workspace-tools", tool_source=["workspace"], json=True)
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "finished"
    assert report["tool_sources"]["schema_tokens"]["workspace"] > 0
    session = Session.objects.get()
    assert results_of(session, "workspace__calculate") == ["8.24"]


def test_a_sub_agent_gets_its_parents_sources(owner, sim_profile, tmp_path):
    script = {"name": "delegating", "goal": "Have a sub-agent work out a share.",
              "tools": ["delegate", "list_files"],
              "steps": [{"tool": "delegate", "args": {"goal": "Work out the share.",
                                                      "scenario": "share"}},
                        {"final": "The sub-agent worked it out."}],
              "subtasks": {"share": {"goal": "Work out the share.", "steps": [
                  {"tool": "workspace__calculate", "args": {"expression": "21 * 2"}},
                  {"final": "42"}]}}}
    path = tmp_path / "delegating.json"
    path.write_text(json.dumps(script))
    source = example_source()
    parent = services.create_session(owner, "", str(path), sim_profile, None, {})
    parent.tool_sources.add(source)
    execute_tree(parent)
    parent.refresh_from_db()
    assert parent.status == "finished", parent.error
    [child] = parent.children.all()
    assert list(child.tool_sources.all()) == [source]
    assert results_of(child, "workspace__calculate") == ["42"]
