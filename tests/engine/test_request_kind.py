"""The schemas' size in a request's kind (agents/counting/calibration.py) is worked out
once per schema list a session sends, and must follow the list actually sent."""

import json

from agents.counting.calibration import request_kind


def test_the_request_kind_follows_the_schema_list_sent(monkeypatch):
    from agents.counting import calibration

    dumped, dumps = [], json.dumps
    monkeypatch.setattr(calibration.json, "dumps",
                        lambda value, **kw: dumped.append(value) or dumps(value, **kw))
    small = [{"type": "function", "function": {"name": "a", "parameters": {}}}]
    large = small + [{"type": "function", "function": {"name": "bb", "parameters": {
        "type": "object", "properties": {"x": {"type": "string"}}}}}]
    lists = (small, small, large, large, small, list(large))
    kinds = [request_kind(tools, "auto", []) for tools in lists]
    assert kinds[0] == kinds[1] == kinds[4] != kinds[2] == kinds[3] == kinds[5]
    assert kinds[2].startswith("auto:2/")
    assert len(dumped) == 4  # once per list each time another one is sent
