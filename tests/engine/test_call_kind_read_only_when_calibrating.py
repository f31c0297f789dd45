"""An agent call works out its request kind (agents.counting.calibration.request_kind) only
for a calibration: without one no MODEL_CALL field and no later step reads it, so the
event a call emits is the same whether the kind was worked out or not."""
from agents.config import ModelProfile
from agents.context.working import Request
from agents.counting.calibration import TokenCalibration, request_kind
from agents.loop import calls as calls_module
from agents.loop.calls import CallLedger, CallRunner
from agents.provider.client import ModelReply

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


class _Model:
    def complete(self, messages, tools, max_tokens, model=None, **extra):
        return ModelReply(content="done", input_tokens=120, output_tokens=4)


def _request() -> Request:
    messages = [{"role": "system", "content": "You help."},
                {"role": "system", "content": "[truncated]"},
                {"role": "user", "content": "Read the file."}]
    return Request(messages=messages, zones_of=["system", "system", "history"],
                   tokens_of=[5, 4, 6], tools=TOOLS, zones={"system": 9, "history": 6},
                   total=15)


def _call(calibration, kind_of):
    events = []
    runner = CallRunner(_Model(), ModelProfile(name="sim"), CallLedger(), events.append)
    runner.calibration = calibration
    original = calls_module.request_kind
    calls_module.request_kind = kind_of
    try:
        runner.agent_call(_request(), limit=1000, max_tokens=100, turn=0)
    finally:
        calls_module.request_kind = original
    [event] = events
    payload = dict(event.payload)
    payload.pop("latency_ms")
    return payload


def test_without_a_calibration_the_call_is_recorded_as_if_its_kind_were_worked_out():
    asked = []

    def counted_kind(*args):
        asked.append(args)
        return request_kind(*args)

    plain = _call(None, counted_kind)
    assert "count_kind" not in plain and "estimated_tokens" not in plain
    assert asked == []  # not worked out: nothing would read it
    # The same call with the kind worked out as before records the same event: any field
    # that read the kind would differ from one recorded with a kind nobody can produce.
    assert _call(None, lambda *args: "never-read") == plain


def test_with_a_calibration_the_recorded_kind_is_the_request_s_kind():
    request = _request()
    want = request_kind(request.tools, "auto", request.messages)
    assert want.endswith("/s2")  # two system messages: the kind depends on the messages
    recorded = _call(TokenCalibration(), request_kind)
    assert recorded["count_kind"] == want
