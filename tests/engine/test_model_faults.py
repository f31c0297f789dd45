"""Model faults (issue 9 F4, F5, F6, F15) against a fake provider on a real socket.

The real openai SDK talks HTTP to tests/engine/fake_provider.py. Waits between retries go
through an injected sleep, so no test waits for a backoff; where a real timeout must pass
the bounds are generous and the assertions count requests and events, not seconds.
"""
from __future__ import annotations

import datetime as dt
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx2

from agents.config import ContextConfig, ModelProfile
from agents.events import EventType, ListSink
from agents.loop.retry import RetryBudget
from agents.loop.spec import SessionSpec
from agents.provider.client import retry_after_seconds
from agents.runner import run_session
from agents.scenarios import load_scenario
from agents.sim.transport import SUMMARY_MARKER, sim_http_client
from agents.store.memory import MemoryStore

from .fake_provider import FakeProvider


class FakeSleep:
    """Records waits instead of sleeping; optionally runs a hook after the first one."""

    def __init__(self, after_first=None) -> None:
        self.calls: list[float] = []
        self.after_first = after_first

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.after_first and len(self.calls) == 1:
            self.after_first()


def run_against(provider: FakeProvider, *, store: MemoryStore | None = None,
                retries: RetryBudget | None = None, session_id: str = "f1", **profile_kw):
    fields = {"api_key_env": "", "context_size": 16_000, **profile_kw}
    profile = ModelProfile(name="fake", model="fake-model", base_url=provider.base_url, **fields)
    store = store or MemoryStore()
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal="Say hello.", scenario=None, profile=profile,
                                           config=ContextConfig()),
                          session_id=session_id, store=store, events=sink, workspace=Path(tmp),
                          retries=retries)
    return run, sink, store


def errors(sink: ListSink, *, fatal: bool) -> list[dict]:
    return [e.payload for e in sink.of_type(EventType.ERROR) if e.payload["fatal"] is fatal]


def finished(sink: ListSink) -> dict:
    [event] = sink.of_type(EventType.SESSION_FINISHED)
    return event.payload


def test_a_hung_model_fails_within_the_budget_and_the_sdk_adds_no_retries():
    budget = RetryBudget(3.0, sleep=FakeSleep(), rng=lambda: 0.5)
    with FakeProvider(default="hang") as provider:
        run, sink, _ = run_against(provider, retries=budget, read_timeout=0.3,
                                   connect_timeout=5, call_timeout=60)
    assert run.status == "failed"
    assert finished(sink)["status"] == "failed"
    retried = errors(sink, fatal=False)
    assert retried and {e["code"] for e in retried} == {"deadline_exceeded"}
    # One HTTP request per loop attempt: the SDK's own retries are off.
    assert len(provider.requests) == len(retried) + 1
    [fatal] = errors(sink, fatal=True)
    assert fatal["code"] == "deadline_exceeded" and "retry budget of 3 s" in fatal["message"]


def test_a_dripping_model_is_cut_at_the_total_call_timeout():
    with FakeProvider(default="drip") as provider:
        run, sink, _ = run_against(provider, retry_budget=0, read_timeout=30,
                                   call_timeout=1.0)
    assert run.status == "failed"
    [fatal] = errors(sink, fatal=True)
    assert fatal["code"] == "deadline_exceeded" and "total limit of 1 s" in fatal["message"]
    assert len(provider.requests) == 1


def test_cancel_interrupts_a_call_in_flight():
    store = MemoryStore()
    cancelled_at: list[float] = []

    def cancel_once_the_call_is_in_flight() -> None:
        provider.received.wait(60)
        cancelled_at.append(time.monotonic())
        store.cancelled.add("f1")

    with FakeProvider(default="hang") as provider:
        helper = threading.Thread(target=cancel_once_the_call_is_in_flight, daemon=True)
        helper.start()
        run, sink, _ = run_against(provider, store=store, read_timeout=120, call_timeout=300)
        returned_at = time.monotonic()
    assert run.status == "cancelled"
    assert finished(sink)["status"] == "cancelled"
    assert len(provider.requests) == 1
    # The call would block for 120 s; the loop polls the cancel flag every 0.5 s.
    assert returned_at - cancelled_at[0] < 30


def test_truncated_json_and_empty_choices_are_retried_then_the_session_finishes():
    sleep = FakeSleep()
    with FakeProvider(script=["truncated", "empty"], default="ok") as provider:
        run, sink, _ = run_against(provider, retries=RetryBudget(300, sleep=sleep))
    assert run.status == "finished" and run.final_answer == "All done."
    retried = errors(sink, fatal=False)
    assert [e["code"] for e in retried] == ["malformed_response", "malformed_response"]
    assert all(e["next_attempt_at"] and e["attempt"] for e in retried)
    assert [r["behaviour"] for r in provider.requests] == ["truncated", "empty", "ok"]
    assert finished(sink)["status"] == "finished"


def test_a_persistent_429_honours_retry_after_until_the_budget_is_spent():
    sleep = FakeSleep()
    budget = RetryBudget(60, sleep=sleep, rng=lambda: 0.0)
    with FakeProvider(default="429", retry_after="7") as provider:
        run, sink, _ = run_against(provider, retries=budget)
    assert run.status == "failed"
    retried = errors(sink, fatal=False)
    assert len(retried) == 8  # 8 waits of 7 s fit in 60 s, the ninth would not
    assert len(provider.requests) == 9
    for event in retried:
        assert event["code"] == "rate_limited" and event["retry_after"] == 7
        assert event["retry_in_s"] >= 7
        assert dt.datetime.fromisoformat(event["next_attempt_at"]).tzinfo is not None
    assert sum(sleep.calls) >= 8 * 7
    [fatal] = errors(sink, fatal=True)
    assert fatal["code"] == "rate_limited" and "retry budget of 60 s is spent" in fatal["message"]


def test_a_cancel_during_a_retry_wait_ends_the_session_cancelled():
    store = MemoryStore()
    sleep = FakeSleep(after_first=lambda: store.cancelled.add("f1"))
    with FakeProvider(default="429", retry_after="100") as provider:
        run, sink, _ = run_against(provider, store=store,
                                   retries=RetryBudget(1000, sleep=sleep))
    assert run.status == "cancelled" and finished(sink)["status"] == "cancelled"
    assert len(provider.requests) == 1 and len(sleep.calls) == 1


def test_backoff_without_retry_after_doubles_with_jitter_and_is_capped():
    low = RetryBudget(1000, base=1.0, cap=60.0, rng=lambda: 0.0)
    high = RetryBudget(1000, base=1.0, cap=60.0, rng=lambda: 0.999999)
    assert [low.delay_for(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert [round(high.delay_for(n, None), 3) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert low.delay_for(30, None) == 30.0 and round(high.delay_for(30, None)) == 60
    assert low.delay_for(1, 12.0) == 12.0 and high.delay_for(1, 12.0) < 13.3


def test_retry_after_is_read_as_seconds_milliseconds_or_a_date():
    def response(**headers):
        return httpx2.Response(429, headers=headers)

    assert retry_after_seconds(response(**{"retry-after": "7"})) == 7.0
    assert retry_after_seconds(response(**{"retry-after-ms": "1500"})) == 1.5
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120)
    http_date = later.strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert 100 < retry_after_seconds(response(**{"retry-after": http_date})) <= 121
    assert retry_after_seconds(response()) is None


def test_an_answer_still_cut_after_every_continuation_ends_failed_not_glued():
    with FakeProvider(default="length") as provider:
        run, sink, store = run_against(provider)
    assert run.status == "failed" and run.final_answer == ""
    assert finished(sink)["status"] == "failed"
    [fatal] = errors(sink, fatal=True)
    assert fatal["code"] == "answer_incomplete"
    assert len(provider.requests) == 6  # the answer and five continuations
    pieces = [r for r in store.archived_rows("f1") if r["tool_args"].get("incomplete_answer_piece")]
    assert [r["content"] for r in pieces] == ["piece of a long answ"] * 6


class FirstSummaryRateLimited(httpx2.BaseTransport):
    """The simulated model, except that the first summary request gets a 429."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.refused = 0

    def handle_request(self, request):
        body = json.loads(request.content or b"{}")
        messages = body.get("messages") or [{}]
        # A summary request carries the marker first (standalone) or last (prefix-reusing).
        ends = [m.get("content") for m in (messages[0], messages[-1])]
        if not self.refused and any(isinstance(c, str) and c.startswith(SUMMARY_MARKER)
                                    for c in ends):
            self.refused += 1
            return httpx2.Response(429, headers={"Retry-After": "3"},
                                   json={"error": {"message": "slow down"}})
        return self.inner.handle_request(request)


def test_a_rate_limited_summary_call_is_retried_instead_of_truncating():
    scenario = load_scenario("retrieval-6x1600")
    _, sim = sim_http_client(scenario, scenario.window)
    flaky = FirstSummaryRateLimited(sim)
    client = httpx2.Client(transport=flaky, base_url="http://sim.taskos.invalid/v1")
    sink, sleep = ListSink(), FakeSleep()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                           profile=ModelProfile(context_size=scenario.window),
                                           config=ContextConfig(clear_tool_results=False)),
                          session_id="s", store=MemoryStore(), events=sink, workspace=Path(tmp),
                          http_client=client,
                          retries=RetryBudget(300, sleep=sleep, rng=lambda: 0.0))
    assert run.status == "finished" and flaky.refused == 1
    assert [e["code"] for e in errors(sink, fatal=False)] == ["rate_limited"]
    assert sum(sleep.calls) == 3
    compactions = [e.payload for e in sink.of_type(EventType.COMPACTION)
                   if e.payload.get("archived_turns")]
    assert compactions and not any(c["fallback"] for c in compactions)


def test_the_retry_notice_says_when_the_next_attempt_is():
    with FakeProvider(script=["500"], default="ok") as provider:
        run, sink, _ = run_against(provider, retries=RetryBudget(300, sleep=FakeSleep(),
                                                                 rng=lambda: 0.0))
    assert run.status == "finished" and len(provider.requests) == 2
    [notice] = errors(sink, fatal=False)
    assert notice["code"] == "provider_error"
    assert f"retrying at {notice['next_attempt_at']} (in 0.5 s;" in notice["message"]


class BatchingStore(MemoryStore):
    """A MemoryStore with the batch calls a database store has (agents/loop/commits.py),
    recording whether a batch is open: the stand-in for a transaction that, on SQLite,
    holds the one write lock of the database."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_open = False
        self.batches = 0

    def begin_batch(self) -> None:
        self.batch_open = True
        self.batches += 1

    def commit_batch(self, durable: bool = False) -> None:
        self.batch_open = False

    def mark_turn_saved(self) -> None:
        pass

    def rollback_batch(self, exc: BaseException) -> None:
        self.batch_open = False


class SleepSeeingTheBatch(FakeSleep):
    def __init__(self, store: BatchingStore) -> None:
        super().__init__()
        self.store, self.open_while_sleeping = store, []

    def __call__(self, seconds: float) -> None:
        super().__call__(seconds)
        self.open_while_sleeping.append(self.store.batch_open)


def test_no_batch_is_open_while_an_agent_call_waits_to_be_retried():
    # Issue 25 item 1: the batch was re-opened (BEGIN IMMEDIATE on SQLite) right after the
    # failed call, so the whole backoff held the database's write lock.
    store = BatchingStore()
    sleep = SleepSeeingTheBatch(store)
    with FakeProvider(script=["500", "429"], default="ok", retry_after="2") as provider:
        run, sink, _ = run_against(provider, store=store,
                                   retries=RetryBudget(300, sleep=sleep, rng=lambda: 0.0))
    assert run.status == "finished" and len(provider.requests) == 3
    assert sleep.open_while_sleeping and not any(sleep.open_while_sleeping)
    # The retry notices were committed before the waits (people see them meanwhile).
    assert [e["code"] for e in errors(sink, fatal=False)] == ["provider_error", "rate_limited"]


def test_no_batch_is_open_while_a_summary_call_waits_to_be_retried():
    scenario = load_scenario("retrieval-6x1600")
    _, sim = sim_http_client(scenario, scenario.window)
    flaky = FirstSummaryRateLimited(sim)
    client = httpx2.Client(transport=flaky, base_url="http://sim.taskos.invalid/v1")
    store = BatchingStore()
    sleep = SleepSeeingTheBatch(store)
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                           profile=ModelProfile(context_size=scenario.window),
                                           config=ContextConfig(clear_tool_results=False)),
                          session_id="s", store=store, events=ListSink(), workspace=Path(tmp),
                          http_client=client,
                          retries=RetryBudget(300, sleep=sleep, rng=lambda: 0.0))
    assert run.status == "finished" and flaky.refused == 1
    assert sleep.open_while_sleeping and not any(sleep.open_while_sleeping)
