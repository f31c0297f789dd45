"""A request that fits is measured once by the keeper's last step (agents/loop/context_keeper.py
fit): each of its steps acts only on a request over the limit, and measuring every zone at
each of them cost a dozen measures a turn."""
from types import SimpleNamespace

from agents.loop.context_keeper import ContextKeeper


class Ctx:
    def __init__(self, history_tokens: int) -> None:
        self.history_tokens, self.measures = history_tokens, 0
        self.history: list = []  # what the steps for a request over the limit would cut
        self.summary_text = ""

    def budget(self):
        return SimpleNamespace(input_limit=1000, window=1500, reserve=500)

    def zones(self, hints=None):
        self.measures += 1
        return {"system": 100, "history": self.history_tokens, "reserve": 500}

    def input_tokens(self, hints=None):
        return sum(v for k, v in self.zones(hints).items() if k != "reserve")


def test_a_request_that_fits_is_measured_once():
    keeper = ContextKeeper.__new__(ContextKeeper)
    keeper.ctx = Ctx(history_tokens=900)  # 1000 in all: exactly at the limit
    hints = [object()]
    keeper.fit(hints)
    assert keeper.ctx.measures == 1
    assert hints  # nothing dropped
