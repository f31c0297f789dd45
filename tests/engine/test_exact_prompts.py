"""Exact counting on llama-cpp-python (issue 11): the whole request rendered as the
server's chat template renders it and counted in one call, checked against every report.

The calibrated figure left 2.7–4 % errors on the real lane where request kinds framed
differently (answer turns, the first call after a truncation, short probes). The fake
server (chatml_server) renders from its own reading of the template; these sessions show
the engine's figure equal to what the server reports, whatever the request's kind.
"""
from __future__ import annotations

import pytest

from agents.compaction.fresh_requests import answer_text
from agents.counting.llama_cpp.prompt_count import ServedPromptCounter
from agents.counting.llama_cpp.served_prompt import escape, render_chatml_function_calling, tojson
from agents.loop.reply_vetting import copies_tool_errors, draws_on
from agents.tools.registry import all_tools

from . import chatml_server
from .test_weak_requests import session

READ = [("tool", "read_file", {"path": f"part{i}.txt"}) for i in range(7)]


@pytest.mark.parametrize("fresh, single", [(True, True), (False, False)])
def test_every_request_is_counted_as_the_server_counts_it(fresh, single):
    # fresh=False, single=False: summaries that fall back, truncation markers as a second
    # system message, the tools written into each system message — the kinds that framed
    # differently. Two calls in one reply: the server reports the sum of two prompts.
    script = [("tool", "list_files", {}),
              ("tools", [("read_file", {"path": "part0.txt"}), ("read_file", {"path": "it's.txt"})]),
              *READ[1:], "answer"]
    run, server, calls, compactions = session(fresh=fresh, single=single, script=script)
    assert compactions and not server.refused
    assert run.report["exact_prompts"] == len(calls) and not run.report["count_mismatch"]
    kinds = {c["kind"] for c in calls}
    assert {"agent", "summary"} <= kinds
    for call in calls:
        assert call["count_source"] == "exact" and call["served_tokens"] == call["input_tokens"]
        body = server.requests[call["call"] - 1]["body"]
        if body.get("tool_choice") == "auto":  # the longest opening, before the reply
            opening = call["estimated_tokens"] - server.requests[call["call"] - 1]["prompt_tokens"]
            assert 0 < opening <= 8, call
            if len(call["reply"]["tool_calls"]) < 2:
                assert 0 <= call["estimated_tokens"] - call["input_tokens"] <= 4, call
        else:  # no tools, or tool_choice "none": the prompt itself
            assert call["estimated_tokens"] == call["input_tokens"], call
    summed = [c for c in calls if len(c["reply"]["tool_calls"]) == 2]
    assert summed and summed[0]["input_tokens"] > 1.9 * summed[0]["estimated_tokens"]


def test_a_server_that_renders_otherwise_turns_exact_counting_off(monkeypatch):
    monkeypatch.setattr(chatml_server, "INSTRUCTIONS", "Answer with message: or functions.NAME:")
    run, server, calls, _ = session(fresh=True, single=True, parts=2,
                                    script=READ[:2] + ["answer"], max_turns=4)
    assert run.status == "finished"
    assert "server reported" in calls[0]["count_mismatch"] and "served_tokens" not in calls[0]
    assert run.report["exact_prompts"] == 0 and run.report["count_mismatch"]
    assert all("served_tokens" not in c for c in calls)  # calibrated from usage from then on


def test_the_template_as_rendered_for_a_request_with_tools():
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}}}}]
    messages = [{"role": "system", "content": "Be <brief>."},
                {"role": "user", "content": "Read 'a.csv'"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function",
                 "function": {"name": "read_file", "arguments": '{"path": "a.csv"}'}}]},
                {"role": "tool", "tool_call_id": "1", "content": "x,y"},
                {"role": "assistant", "content": "Done & done"}]
    listing = ('\n\nYou have access to the following functions:\n\nfunctions.read_file:\n'
               '{"properties": {"path": {"type": "string"}}, "type": "object"}\n'
               + chatml_server.INSTRUCTIONS.join(["\n\n", ""]))
    assert render_chatml_function_calling(messages, tools, "auto") == (
        f"<|im_start|>system\nBe &lt;brief&gt;.{listing}<|im_end|>\n"
        "<|im_start|>user\nRead &#39;a.csv&#39;<|im_end|>\n"
        "<|im_start|>assistant\nfunctions.read_file:\n{&#34;path&#34;: &#34;a.csv&#34;}<|im_end|>\n"
        "<|im_start|>tool\n"
        "<|im_start|>assistant\nmessage:\nDone &amp; done<|im_end|>\n"
        "<|im_start|>assistant\n")
    # tool_choice "none" (a summary that repeats the prefix): no tools, no "message:"
    assert render_chatml_function_calling(messages[-1:], tools, "none") == (
        "<|im_start|>assistant\nDone &amp; done<|im_end|>\n<|im_start|>assistant\n")
    assert render_chatml_function_calling(messages, tools, "auto") == chatml_server.render(
        messages, tools, "auto")


def test_jinja_escaping_and_tojson():
    assert escape("""a<b & "c" 'd'""") == "a&lt;b &amp; &#34;c&#34; &#39;d&#39;"
    assert tojson({"b": 1, "a": "<'&>é"}) == '{"a": "\\u003c\\u0027\\u0026\\u003e\\u00e9", "b": 1}'


# --- an answer that only copies a tool error


ERROR = ("Error: The arguments for list_files are not valid JSON (Expecting value). Send one "
         "JSON object, e.g. {}.")


def test_an_answer_made_of_a_tool_error_is_told_from_one_that_uses_it():
    assert copies_tool_errors("The tools returned: " + ERROR, [ERROR])
    assert copies_tool_errors("The arguments for list_files are not valid JSON", [ERROR])
    assert not copies_tool_errors("The CSV file is sales.csv; list_files first said: The "
                                  "arguments for list_files are not valid JSON", [ERROR])
    assert not copies_tool_errors("The tools returned: " + ERROR, [])


def test_a_tool_task_whose_answer_only_copies_a_tool_error_ends_with_a_clear_status():
    # SmolLM2 on the real lane: its calls failed, and asked for the answer without tools it
    # copied the error ("The tools returned: Error: …"): that was reported "finished".
    failing = [("tool", "list_files", "not an object")] * 2
    run, server, calls, _ = session(fresh=True, single=True, parts=1, script=failing,
                                    max_turns=3)
    assert calls[-1]["reply"]["content"].startswith("The tools returned: Error: ")
    assert run.status == "unusable_answer" and run.result.code == "unusable_answer"
    assert "only repeated a tool's error message" in run.result.error


def test_an_answer_copied_from_a_tool_result_that_succeeded_still_finishes():
    run, server, calls, _ = session(fresh=True, single=True, parts=2, max_turns=3,
                                    script=[("tool", "list_files", {}),
                                            ("tool", "list_files", "not an object")])
    assert run.status == "finished" and "part1.txt" in run.final_answer


def test_an_answer_is_drawn_from_results_when_it_holds_a_word_or_figure_only_they_hold():
    results = ["2 files under '.':\n| path | bytes |\n| sales.csv | 1204 |\n| notes.txt | 88 |"]
    goal = ["Call the list_files tool, then answer with the name of the CSV file you found."]
    assert draws_on("The CSV file is sales.csv.", results, goal)
    assert draws_on("It has 1204 bytes.", results, goal)
    # SmolLM2's answer on the real lane: words of the goal and its own, none of the results
    assert not draws_on("The list_files tool returns a list of all the files in the "
                        "specified folder.", results, goal)
    assert not draws_on("The CSV file is sales.csv.", [], goal)


def test_an_answer_turn_whose_answer_holds_nothing_of_the_results_ends_with_a_clear_status():
    # SmolLM2's two answers on the lane; the second holds "path", a word of list_files'
    # table header and of its schema: the tool's own words are no result.
    for said in ("The list_files tool returns a list of all the files in the specified folder.",
                 "The list_files tool returns a list of all the files in the workspace that "
                 "match the given path."):
        run, server, calls, _ = session(fresh=True, single=True, parts=2, max_turns=2,
                                        script=[("tool", "list_files", {})], answer=said)
        assert calls[-1]["reply"]["content"] == said
        assert run.status == "unusable_answer" and run.result.code == "unusable_answer", run.result
        assert "not drawn from them" in run.result.error


def test_an_answer_turn_keeps_the_answer_and_not_the_frame_the_model_wrote_again():
    said = ("The file sales.csv holds the revenue.\n\nQuestion: Never write or delete any "
            "file. Read the file sales.csv.\n\nAnswer:")
    assert answer_text(said) == "The file sales.csv holds the revenue."
    assert answer_text("Answer: part0.txt") == "part0.txt"
    run, server, calls, _ = session(fresh=True, single=True, parts=2, max_turns=2,
                                    script=[("tool", "list_files", {})],
                                    answer="Answer: part1.txt is there.\nQuestion: " + "x" * 20)
    assert run.status == "finished" and run.final_answer == "part1.txt is there."


def test_what_the_model_writes_escaped_is_read_back_unescaped():
    # The model reads every text escaped and writes the same way: a tool call written as
    # text with &#34; for its quotes, and an answer with &#39;.
    script = [("say", "functions.read_file:\n{&#34;path&#34;: &#34;part0.txt&#34;}"),
              ("say", "North revenue 1000.00 &amp; it&#39;s from part0.txt")]
    run, server, calls, _ = session(fresh=False, single=True, parts=1, script=script,
                                    max_turns=4)
    assert calls[0]["reply"]["content"] == 'functions.read_file:\n{"path": "part0.txt"}'
    assert run.status == "finished", run.result
    assert run.final_answer == "North revenue 1000.00 & it's from part0.txt"


# --- an opening's tokens are counted once per session


def whole_prompts_counted(server) -> list[int]:
    """How many whole prompts the engine sent to /extras/tokenize before each request."""
    counts, done = [], 0
    for request in server.requests:
        sent = server.tokenized[done:request["tokenized_before"]]
        counts.append(sum(text.startswith("<|im_start|>") for text in sent))
        done = request["tokenized_before"]
    return counts


def test_with_sixteen_tools_a_request_after_the_first_sends_one_prompt_to_the_tokenizer():
    tools = tuple(tool.name for tool in all_tools())
    script = [("tool", "list_files", {}),
              ("tools", [("read_file", {"path": "part0.txt"}),
                         ("read_file", {"path": "part1.txt"})]),
              *READ[2:4], "answer"]
    run, server, calls, _ = session(fresh=True, single=True, parts=4, script=script, tools=tools)
    assert len(tools) == 16 and run.status == "finished" and not server.refused
    expected, first_with_tools = [], True
    for call in calls:
        body = server.requests[call["call"] - 1]["body"]
        sent = 1  # the prompt
        if body.get("tool_choice") == "auto" and first_with_tools:
            sent, first_with_tools = 1 + 1 + 16, False  # and `message:` and one per tool
        if expected and len(calls[len(expected) - 1]["reply"]["tool_calls"]) == 2:
            sent += 1  # the reply's second call: the prompt it was completed from
        expected.append(sent)
    assert whole_prompts_counted(server) == expected
    assert expected[0] == 18 and expected.count(1) >= len(expected) - 2
    # the figures stay exact: every report matched the figure worked out for the reply
    assert run.report["exact_prompts"] == len(calls) and not run.report["count_mismatch"]
    for call in calls:
        assert call["count_source"] == "exact" and call["served_tokens"] == call["input_tokens"]
        request = server.requests[call["call"] - 1]
        if request["body"].get("tool_choice") == "auto":
            openings = [f"functions.{name}:\n" for name in tools] + ["message:\n"]
            longest = max(chatml_server.count(request["prompt"] + o) for o in openings)
            assert call["estimated_tokens"] == longest, call


TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}} for name in ("read_file", "x")]


def requests_of(turns: int) -> list[list[dict]]:
    """Requests of a growing conversation, each ending on another kind of message."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go"}]
    out = []
    for i in range(turns):
        messages = messages + [
            {"role": "assistant", "content": "", "tool_calls": [{"id": str(i), "type": "function",
             "function": {"name": "read_file", "arguments": f'{{"path": "p{i}.txt"}}'}}]},
            {"role": "tool", "tool_call_id": str(i), "content": f"row {i}"}]
        out.append(messages + ([{"role": "user", "content": f"and then {i}?"}] if i % 2 else []))
    return out


def test_an_opening_that_merges_with_the_newline_before_it_is_still_counted_exactly():
    # A vocabulary with a token for "\nmessage" and one for "\nfunctions" (SentencePiece-
    # like): the opening merges with the end of every prompt, so counted alone it would
    # be one token off; what it adds after the prompt's fixed last line is the same each time.
    def merging(text: str) -> int:
        return chatml_server.count(text) - text.count("\nmessage") - text.count("\nfunctions")

    sent: list[str] = []
    counter = ServedPromptCounter(lambda text: sent.append(text) or merging(text))
    for number, messages in enumerate(requests_of(4)):
        before = len(sent)
        figures = counter.count(messages, TOOLS, "auto")
        prompt = render_chatml_function_calling(messages, TOOLS, "auto")
        assert len(sent) - before == (4 if number == 0 else 1)
        assert figures.tokens == max(merging(prompt + o) for o in ("message:\n",
                                     "functions.read_file:\n", "functions.x:\n"))
        assert figures.reported("ok", []) == merging(prompt + "message:\n")
        call = {"name": "x", "arguments": "{}"}
        assert figures.reported("", [call]) == merging(prompt + "functions.x:\n")
        assert len(sent) - before == (4 if number == 0 else 1)
        # the merge across the boundary is real: the opening alone counts otherwise
        assert merging(prompt + "message:\n") - merging(prompt) != merging("message:\n")


def test_an_opening_figure_that_did_not_hold_ends_exact_counting_at_the_next_report():
    # A tokenizer whose opening merges with text before the prompt's last line (none of
    # llama.cpp's: a special token splits the text first) breaks the reused figure; the
    # report of the reply shows it, and the session goes on calibrated from usage.
    def odd(text: str) -> int:
        return chatml_server.count(text) - (text.endswith("message:\n") and "and then" in text)

    counter = ServedPromptCounter(odd)
    first, second = requests_of(2)
    assert counter.check(counter.count(first, TOOLS, "auto"), "ok", [],
                         odd(render_chatml_function_calling(first, TOOLS, "auto") + "message:\n"))
    figures = counter.count(second, TOOLS, "auto")
    reported = odd(render_chatml_function_calling(second, TOOLS, "auto") + "message:\n")
    assert counter.check(figures, "ok", [], reported) is None
    assert not counter.active and "server reported" in counter.mismatch
