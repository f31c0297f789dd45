"""Messages with their cached token counts, grouped into units that never split.

A unit is what compaction may move as a whole: a user message, an assistant message with
its tool results (so a tool call is never separated from its result), or a final answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.counting.tokens import TokenCounter


@dataclass
class Msg:
    """One chat message as sent, plus what the engine knows about it."""

    # The OpenAI message dict, exactly as it goes into the request. Never changed in
    # place (a changed message is a new Msg): the state save keys its text by the dict.
    data: dict[str, Any]
    tokens: int  # cached count, framing included
    turn: int = 0
    ref: str = ""  # archive ref of the raw message

    @classmethod
    def build(cls, counter: TokenCounter, data: dict[str, Any], turn: int = 0,
              ref: str = "", content_tokens: int | None = None) -> "Msg":
        """`content_tokens`: the text content's count, when the caller already has it."""
        if content_tokens is None or not isinstance(data.get("content"), str):
            return cls(data=data, tokens=counter.message(data), turn=turn, ref=ref)
        framing = counter.message({**data, "content": ""})
        return cls(data=data, tokens=framing + content_tokens, turn=turn, ref=ref)

    @property
    def role(self) -> str:
        return self.data.get("role", "")

    @property
    def text(self) -> str:
        content = self.data.get("content")
        return content if isinstance(content, str) else ""

    def to_state(self) -> dict[str, Any]:
        """Saved with the loop state every turn while the message is in the history: made
        once and kept (a Msg is never changed in place). Read-only, like `data`."""
        kept = self.__dict__.get("_state")
        if kept is None:
            kept = self.__dict__["_state"] = {"data": self.data, "tokens": self.tokens,
                                              "turn": self.turn, "ref": self.ref}
        return kept

    def described(self, zone: str) -> dict[str, Any]:
        """The message as a MODEL_CALL lists it in `zone` (Request.described): made once
        per zone and kept, since a Msg is never changed in place and most messages are
        in every call until the next compaction. Read-only, like the data it copies."""
        kept = self.__dict__.get("_described")
        if kept is not None and kept[0] == zone:
            return kept[1]
        described = {**self.data, "zone": zone, "tokens": self.tokens,
                     **({"ref": self.ref} if self.ref else {})}
        self.__dict__["_described"] = (zone, described)
        return described

    @classmethod
    def from_state(cls, raw: dict[str, Any]) -> "Msg":
        return cls(**raw)


@dataclass
class Unit:
    """Messages that enter and leave the context together."""

    messages: list[Msg] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages)

    @property
    def is_round(self) -> bool:
        """A round is a tool call with its results (the vocabulary of docs/features.md)."""
        # The role read from the dict, not through Msg.role: the triggers and the clearing
        # tier ask this of every unit of the history several times a turn.
        return any(m.data.get("role") == "tool" for m in self.messages)

    @property
    def turns(self) -> list[int]:
        return [m.turn for m in self.messages]


def group_units(messages: list[Msg]) -> list[Unit]:
    """Split history into units; tool messages always join the assistant call before them."""
    units: list[Unit] = []
    for msg in messages:
        add_grouped(units, msg)
    return units


def add_grouped(units: list[Unit], msg: Msg) -> None:
    """Append `msg` to `units` as group_units would: a tool message joins the last unit
    when that unit is a call (only the last unit is read, and only it can change)."""
    if msg.role == "tool" and units and units[-1].messages[0].data.get("tool_calls"):
        units[-1].messages.append(msg)
    else:
        units.append(Unit([msg]))


def flatten(units: list[Unit]) -> list[Msg]:
    return [m for u in units for m in u.messages]
