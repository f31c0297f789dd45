"""Honest endings on weak servers: what a small model wrote instead of an answer is never
reported as the final answer, and the answer turn carries the person's later messages.

On a local lane with SmolLM2-135M and Gemma-3-270M, sessions ended "finished" on "I'm ready
to assist. What's your task?", on a copy of the time hint with another date, on the task
restated, on the task snapshot followed by `<s>[INST]`, and on an HTML-escaped copy of
TaskOS's own summary block. The fake llama-cpp-python server (chatml_server) renders every
text escaped, as the real template does, so a reply copied from its prompt is escaped too.
"""
from __future__ import annotations

import html
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

from agents.compaction.fresh_requests import ANSWER_PERSON, ANSWER_PROMPT
from agents.config import ContextConfig, ModelProfile
from agents.events import EventType, ListSink
from agents.loop.reply_vetting import NOT_DRAWN, QUESTION_BACK, RESTATED, echoed, unsupported
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.store.memory import MemoryStore

from .chatml_server import ChatmlServer, completion, count
from .test_weak_requests import GOAL, part

READ_ALL = [("tool", "list_files", {}), ("tool", "read_file", {"path": "part0.txt"})]


class CopyingServer(ChatmlServer):
    """The fake server whose agent script may hold a function of the rendered prompt: what
    a model that lost track of its turn writes back from it."""

    def _agent_turn(self, prompt: str) -> dict[str, Any]:
        if self.agent_script and callable(self.agent_script[0]):
            write: Callable[[str], str] = self.agent_script.pop(0)
            return completion(write(prompt), count(prompt + "message:\n"))
        return super()._agent_turn(prompt)


class LaterMessageStore(MemoryStore):
    """A person who adds a message before turn `at`."""

    def __init__(self, at: int, text: str) -> None:
        super().__init__()
        self.at, self.text, self.given = at, text, False

    def take_user_messages(self, session_id, turn=0):
        if turn >= self.at and not self.given:
            self.given = True
            return [self.text]
        return super().take_user_messages(session_id, turn)


def run(script: list, *, parts: int = 2, max_turns: int = 6, store: MemoryStore | None = None,
        max_rounds: int = 4, clear: bool = True, answer: str | None = None):
    profile = ModelProfile(name="local", model="smollm2-fake", api_key_env="", context_size=4096,
                           server_tokenizer=True, tool_results_as_user=True,
                           tool_free_summaries=True, single_system_message=True)
    sink = ListSink()
    with CopyingServer(script, answer=answer) as server, tempfile.TemporaryDirectory() as tmp:
        for i in range(parts):
            Path(tmp, f"part{i}.txt").write_text(part(i))
        profile = ModelProfile(**{**profile.__dict__, "base_url": server.base_url})
        result = run_session(
            SessionSpec.plan(goal=GOAL, scenario=None, profile=profile,
                             config=ContextConfig(max_rounds=max_rounds, max_turns=max_turns,
                                                  clear_tool_results=clear),
                             tools=["list_files", "read_file"]),
            session_id="honest", store=store or MemoryStore(), events=sink, workspace=Path(tmp))
    return result, server, sink


def rejected(sink: ListSink) -> list[str]:
    return [e.payload["content"] for e in sink.of_type(EventType.ASSISTANT_MESSAGE)
            if e.payload.get("rejected")]


def assert_no_answer(script: list, quote: str, **kw) -> None:
    """Asked again once, then the session ends `unusable_answer` quoting what it got."""
    result, server, sink = run(script, **kw)
    assert result.status == "unusable_answer" and result.result.code == "unusable_answer", result.result
    assert result.final_answer == "" and quote in result.result.error, result.result.error
    assert len(rejected(sink)) == 2


def block(prompt: str, opening: str, closing: str) -> str:
    """The escaped block of the rendered prompt between `opening` and `closing`."""
    found = re.search(re.escape(opening) + r".*?" + re.escape(closing), prompt, re.S)
    assert found, opening
    return found.group()


# --- the five non-answers of the local lane


def test_a_greeting_that_asks_for_the_task_is_no_answer():
    said = "I'm ready to assist. What's your task?"
    assert_no_answer([("say", said), ("say", said)], said)
    escaped = html.escape(said)  # as the template renders it: I&#x27;m …
    assert_no_answer([("say", escaped), ("say", escaped)], "What's your task?")


def test_a_copy_of_the_time_hint_with_another_date_is_no_answer():
    said = "Current time: 2024-03-09 07:15 UTC."
    assert_no_answer([("say", said), ("say", said)], said)
    escaped = f"&lt;system-hint&gt;\n[time] {said}\n&lt;/system-hint&gt;"
    assert_no_answer([("say", escaped), ("say", escaped)], said)


def test_the_task_restated_is_no_answer():
    # Not a copy of the goal's text (an echo of the snapshot), its words in another order.
    said = "Report the revenue of each region from the part files, read with read_file."
    assert_no_answer([("say", said), ("say", said)], said)
    assert_no_answer([("say", html.escape(said))] * 2, said)


def test_the_task_snapshot_followed_by_an_instruction_token_is_no_answer():
    def snapshot_then_inst(prompt: str) -> str:
        return block(prompt, "&lt;task-snapshot&gt;", "&lt;/task-snapshot&gt;") + "\n<s>[INST]"

    result, server, sink = run([snapshot_then_inst, snapshot_then_inst])
    assert result.status == "unusable_answer" and result.result.code == "unusable_answer", result.result
    assert "task-snapshot" in result.result.error and len(rejected(sink)) == 2
    # the same unescaped, in a markdown quote
    def quoted(prompt: str) -> str:
        copy = html.unescape(snapshot_then_inst(prompt))
        return "\n".join(f"> {line}" for line in copy.splitlines())

    result, server, sink = run([quoted, quoted])
    assert result.status == "unusable_answer" and result.result.code == "unusable_answer", result.result


def test_an_html_escaped_copy_of_the_summary_block_is_no_answer():
    def summary_copy(prompt: str) -> str:
        return block(prompt, "&lt;system-info&gt;", "&lt;/system-info&gt;")

    def partial_copy(prompt: str) -> str:  # cut off mid-line, as a runaway answer is
        copy = summary_copy(prompt)
        return copy[:len(copy) * 2 // 3]

    reads = [("tool", "read_file", {"path": f"part{i}.txt"}) for i in range(4)]
    for copy in (summary_copy, partial_copy):
        script = [("tool", "list_files", {}), *reads, copy, copy]
        # A summary to copy: clearing, which writes none, would make the room first.
        result, server, sink = run(script, parts=4, max_turns=10, max_rounds=1, clear=False)
        compactions = [e for e in sink.of_type(EventType.COMPACTION)
                       if e.payload.get("summary_after")]
        assert compactions, "no summary to copy"
        assert result.status == "unusable_answer" and result.result.code == "unusable_answer", \
            result.final_answer
        assert "system-info" in result.result.error


# --- real answers stand


def test_an_answer_citing_figures_of_the_tool_results_is_accepted_in_english_and_chinese():
    for said in ("North revenue was 1000.00 in month 1 (part0.txt).",
                 "北区第一个月的收入是 1000.00（见 part0.txt）。"):
        result, server, sink = run([*READ_ALL, ("say", said)])
        assert result.status == "finished", result.result
        assert result.final_answer == said and not rejected(sink)


def test_the_checks_are_language_independent():
    results = ["2 files under '.':\n| path | bytes |\n| 销售.csv | 1204 |"]
    goal = "列出文件，然后告诉我 CSV 文件的名字。"
    assert unsupported("CSV 文件是 销售.csv，有 1204 字节。", sources=results, goal=goal) is None
    assert unsupported("你好！我可以帮你做什么？", sources=results, goal=goal) == QUESTION_BACK
    assert unsupported("列出文件，告诉我CSV文件的名字", sources=results, goal=goal) == RESTATED
    assert unsupported("我已经完成了这项工作。", sources=results, goal=goal) == NOT_DRAWN
    # nothing to draw from (a task without tools): only asking back and restating are refused
    assert unsupported("秋天的落叶", sources=[], goal="写一首关于秋天的诗") is None
    assert unsupported("What would you like me to write?", sources=[],
                       goal="Write a haiku about autumn.") == QUESTION_BACK
    # the summary is no source: it is the engine's, an escaped copy of it is an echo
    summary = "<system-info>\nSummary of the earlier work.\n## Key data\n- 销售.csv 1204\n</system-info>"
    assert echoed(html.escape(summary), [summary])
    assert echoed(html.escape(html.escape(summary)), [summary])  # &amp;lt; …


# --- the answer turn carries the person's words


def test_the_answer_turn_carries_a_constraint_the_person_added_mid_task():
    said = "Use data up to 2026-10-31 only."
    repeating = [("tool", "list_files", {})] * 8  # the answer turn comes after the repeats
    result, server, sink = run(repeating, store=LaterMessageStore(2, said))
    answer_turns = [r["body"] for r in server.requests if "tools" not in r["body"]
                    and r["body"]["messages"][-1]["content"].endswith("Answer:")]
    assert answer_turns, "no answer turn"
    material = answer_turns[-1]["messages"][-1]["content"]
    assert said in material and ANSWER_PERSON in material
    assert material.index(said) < material.index("Question:")


def test_a_copy_of_the_answer_turns_own_frame_with_the_persons_line_is_no_answer():
    # Gemma-3-270M under llama-2 answered the answer turn with the turn's own request: its
    # instruction, its labels (one word changed) and the person's later message, wrapped
    # in llama-2's tokens. The person's line held the only "drawn" words.
    said = "Note: use data up to 2026-10-31 only; the November 2026 figures are preliminary."
    frame = ("<<SYS>>\n\n[INST] <<SYS>>\n" + ANSWER_PROMPT + "\n<</SYS>> What the tool "
             "returned:\n\n" + ANSWER_PERSON + "\n- " + said)
    repeating = [("tool", "list_files", {})] * 8  # the answer turn comes after the repeats
    assert_no_answer(repeating, "You finish an agent", store=LaterMessageStore(1, said),
                     answer=frame)
