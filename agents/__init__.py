"""TaskOS's engine: long agent tasks with the context window managed as a budget.

This module is the engine's public API; the web app (taskos/) imports only from here.
What it offers, by concern:

- running a session: `run_session` (and `run_tree` with its sub-agents), its settings
  (`ContextConfig`, `ModelProfile`) and its report (`SessionRun`, `ReportSink`);
- what crosses the boundary: `Event` and `EventType` going out, the `Store` protocol
  and its records coming back;
- scenarios the simulated model plays, the tools on offer, replay and the benchmark;
- the small things the drawer shows the engine's way: zones, annotations, token counts,
  error advice, and redaction of API keys.

Where the code lives: `loop/` the agent loop, `context/` the zones and the request,
`words/` the person's words and anchors, `compaction/` summaries and their audits,
`counting/` tokens and money, `provider/` the model client, `tools/`, `store/`, and apart
from the core: `sim/` (the simulated model), `replay/`, `scenarios/` and `bench/`.
"""
from agents.bench import run_bench, run_once
from agents.config import (KNOWN_CONTEXT_SIZES, MAX_INPUT_CHARS, TOOLS_OFF_NOTICE, WINDOW, Bounds,
                           ConfigError, ContextConfig, ModelProfile, ProfileInvalid, Setting,
                           check_number, input_too_long, profile_settings)
from agents.context import ANNOTATIONS
from agents.context.budget import plan_budget
from agents.counting import PRICE_TABLES, REPLY_PRIMING, TokenCounter
from agents.errors import advise, error_event
from agents.events import (ZONES, AnchorChanged, AssistantMessage, Audit, BudgetEvent, Compaction,
                           CompactionStarted, ErrorEvent, Event, EventSink, EventType, HintBlock,
                           ListSink, ModelCall, NotesChanged, Offload, SessionFinished,
                           SessionStarted, SessionWaiting, TasksChanged, ToolCall, ToolResult,
                           TurnStarted, UserMessage, event_from)
from agents.loop import AgentLoop, RunResult, SessionSpec, canonical_keys
from agents.loop.agent_loop import WAITING_FOR_APPROVAL
from agents.model_check import (Capability, CheckFailed, CheckResult, check_model,
                                format_result, result_json)
from agents.provider import (DEFAULT_HOSTS, HostUnresolved, UrlRefused, check_model_url,
                             mark_carriers, wire_with_marks)
from agents.replay import Recording, RecordingError, build_recording, differences, replay_runner
from agents.report import ReportSink
from agents.runner import SessionRun, run_session
from agents.scenarios import Scenario, ScenarioError, list_scenarios, load_scenario
from agents.secrets import KeyEnvRefused, RedactingFilter, check_key_env, redact
from agents.statuses import FINAL_STATUSES, UNUSABLE_ANSWER
from agents.storable import BAD_MARK, NUL_MARK, storable_text, storable_value
from agents.store import (AnchorRecord, ApprovalRecord, ArchiveHit, ChildRecord, MemoryStore, Store,
                          TaskRecord, excerpt_around, keywords)
from agents.subagents import run_tree
from agents.tools.ask_first import AskFirst
from agents.tools import DelegationLimits, default_registry
from agents.tools.base import ToolError
from agents.tools.workspace import open_in_workspace
from agents.scenarios import DATA_DIR

__all__ = [
    # running a session
    "run_session", "run_tree", "SessionRun", "SessionSpec", "RunResult", "AgentLoop",
    "FINAL_STATUSES", "UNUSABLE_ANSWER",
    "ContextConfig", "ModelProfile", "ConfigError", "KNOWN_CONTEXT_SIZES", "MAX_INPUT_CHARS",
    "input_too_long", "Setting", "profile_settings", "ReportSink", "DelegationLimits", "default_registry",
    # every number a person sets has its range (issue 25 item 6); which hosts a model URL
    # may name (item 9)
    "Bounds", "check_number", "WINDOW", "ProfileInvalid", "check_model_url", "UrlRefused",
    "HostUnresolved", "DEFAULT_HOSTS",
    # what a profile's server really does, checked before the first task
    "check_model", "CheckResult", "CheckFailed", "Capability", "format_result", "result_json",
    "TOOLS_OFF_NOTICE",
    # events going out
    "Event", "EventType", "EventSink", "ListSink", "event_from", "ZONES",
    "SessionStarted", "TurnStarted", "UserMessage", "BudgetEvent", "ModelCall",
    "AssistantMessage", "ToolCall", "ToolResult", "CompactionStarted", "Compaction", "Audit",
    "HintBlock", "AnchorChanged", "TasksChanged", "NotesChanged", "Offload", "ErrorEvent",
    "SessionWaiting", "SessionFinished", "error_event", "advise",
    # what the engine stores through the Store protocol
    "Store", "MemoryStore", "AnchorRecord", "TaskRecord", "ArchiveHit", "ChildRecord",
    # ask before a tool acts (T11): which calls wait, and what a person decided
    "AskFirst", "ApprovalRecord", "WAITING_FOR_APPROVAL",
    "keywords", "excerpt_around",
    # text no database can store (NUL, lone surrogates), made storable by one rule
    "storable_text", "storable_value", "NUL_MARK", "BAD_MARK",
    # scenarios, replay, the benchmark
    "Scenario", "ScenarioError", "list_scenarios", "load_scenario",
    "Recording", "RecordingError", "build_recording", "replay_runner", "differences",
    "run_bench", "run_once", "PRICE_TABLES",
    # what the drawer shows the engine's way, and keys kept out of everything
    "ANNOTATIONS", "REPLY_PRIMING", "TokenCounter", "canonical_keys",
    # a stored call's messages as its request sent them, cache marks and all
    "wire_with_marks", "mark_carriers",
    "plan_budget",  # the start form says when a goal exceeds the person's words' share
    "KeyEnvRefused", "RedactingFilter", "check_key_env", "redact",
    # the workspace as the tools open it, for the person's files (T9); the demo data
    "open_in_workspace", "ToolError", "DATA_DIR",
]
