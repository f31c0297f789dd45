"""Vetting a Chinese final answer (agents.loop.reply_vetting): is it drawn from the tool results,
or does it only copy a tool's error?

Chinese has no spaces, so a whole sentence was one `\\w+` "word": an answer that used the
results' names and figures shared no word with them, and an answer that copied half an
error shared no run of four words with it. Words are now split as the archive's search
splits them (each CJK character a word); a mark of the results is two characters in a row,
and a copied run is eight characters (a CJK character weighs half a word).
"""
from __future__ import annotations

from agents.loop.reply_vetting import _WORDS, copies_tool_errors, draws_on, echoed
from agents.store.search import keywords

from . import test_weak_requests
from .test_weak_requests import session

RESULTS = ["目录 '.' 下有 2 个文件：\n| 路径 | 字节 |\n| 销售报表.csv | 1204 |\n| 备忘录.txt | 88 |"]
GOAL = ["调用 list_files 工具，然后回答你找到的 CSV 文件的名称。"]
# A tool error with no space and no ASCII word in its sentences: two giant "words" before.
ERROR = "Error: 找不到文件销售报表。请先调用列出文件的工具查看目录里有哪些文件，然后用其中一个路径再试。"


def test_vetting_splits_words_as_the_archive_search_does():
    text = "北区收入 1204 元, read_file 读了 part0.txt"
    assert set(_WORDS.findall(text.lower())) == keywords(text)
    assert _WORDS.findall("The CSV file is sales.csv") == [
        "The", "CSV", "file", "is", "sales", "csv"]


def test_a_chinese_answer_with_names_or_figures_of_chinese_results_is_drawn_from_them():
    assert draws_on("CSV 文件是销售报表.csv。", RESULTS, GOAL)  # a name of the results
    assert draws_on("它有1204字节。", RESULTS, GOAL)  # a figure written into Chinese text
    # SmolLM2's answer in Chinese: words of the goal and its own, none of the results
    assert not draws_on("list_files 工具返回指定文件夹中所有文件的列表。", RESULTS, GOAL)
    assert not draws_on("我不知道答案。", RESULTS, GOAL)  # no character of any result
    assert not draws_on("CSV 文件是销售报表.csv。", [], GOAL)


def test_a_chinese_answer_that_only_copies_a_chinese_tool_error_is_refused():
    assert copies_tool_errors("工具返回：" + ERROR, [ERROR])
    # a part of the error, cut where the model stopped: no run of four giant words before
    assert copies_tool_errors("找不到文件销售报表，请先调用列出文件的工具", [ERROR])
    assert copies_tool_errors("工具返回：找不到文件销售报表。", [ERROR])  # 9 characters in a row
    # the same error quoted in an answer of its own is an answer
    assert not copies_tool_errors("销售报表不在目录里，所以北区的收入无法计算；工具说：找不到文件"
                                  "销售报表。请先调用列出文件的工具查看目录。", [ERROR])
    # ten characters of its own around the copy: a CJK character counts two letters
    assert not copies_tool_errors("北区收入一千元。工具说：找不到文件销售报表。", [ERROR])
    assert not copies_tool_errors("工具返回：找不到文件。", [ERROR])  # 5 characters: no run
    # English is judged as before: four words in a row
    assert copies_tool_errors("The tools returned: the arguments for list_files are", [
        "Error: The arguments for list_files are not valid JSON."])
    assert not copies_tool_errors("The tools returned: arguments for list_files", [
        "Error: The arguments for list_files are not valid JSON."])


def test_a_chinese_answer_beyond_an_echoed_line_is_weighed_by_its_characters():
    snapshot = "<task-snapshot>\n目标：统计各区的收入\n</task-snapshot>"
    # ten characters of its own: twenty letters' worth
    assert not echoed("目标：统计各区的收入\n北区一千元，南区八百元。", [snapshot])
    assert echoed("目标：统计各区的收入\n好的，完成了。", [snapshot])


def chinese_part(i: int) -> str:
    rows = [f"{'北南东西中'[i]}区{m}月收入{1000 + 37 * i}元" for m in range(1, 4)]
    return "\n".join(rows + [f"备注{k}：该区办公室按时提交了报表" for k in range(30)])


def test_an_answer_turn_over_chinese_results_finishes_only_on_an_answer_drawn_from_them(
        monkeypatch):
    monkeypatch.setattr(test_weak_requests, "part", chinese_part)
    for answer, finished in (("北区的收入是每月1000元。", True),
                             ("工具返回了文件夹中所有文件的列表。", False)):
        run, server, calls, _ = session(fresh=True, single=True, parts=1, max_turns=2,
                                        script=[("tool", "read_file", {"path": "part0.txt"})],
                                        answer=answer)
        assert calls[-1]["reply"]["content"] == answer
        if finished:
            assert run.status == "finished" and run.final_answer == answer, run.result
        else:
            assert run.status == "unusable_answer" and run.result.code == "unusable_answer", run.result
            assert "not drawn from them" in run.result.error
