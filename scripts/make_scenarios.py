"""Regenerate the bundled load scenarios (retrieval-6x1600, long-200).

Run: python scripts/make_scenarios.py — the JSON files are committed; this keeps them
reproducible and documents how they were made.
"""
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "agents" / "scenarios"
TOPICS = ["battery chemistry", "grid storage", "solar yield", "wind capacity", "EV charging",
          "hydrogen electrolysis", "heat pumps", "transmission losses"]


def retrieval() -> dict:
    steps = [{"tool": "fetch_document", "args": {"tokens": 1600, "topic": TOPICS[i]},
              "say": f"Retrieving source {i + 1} of 6."} for i in range(6)]
    steps.append({"final": "Six sources retrieved and summarised; see the key figures above."})
    return {"name": "retrieval-6x1600", "window": 4000, "tools": ["fetch_document"],
            "goal": "Collect six sources on the energy transition and report their key figures.",
            "steps": steps}


def long_200() -> dict:
    users = {
        1: "Hard constraints: the final report must include a table. "
           "The budget is at most 50k tokens.",
        40: "另外，数据必须截止到2026年10月31日。报告一定要用中文写摘要。",
        120: "Change of plan: the budget is at most 80k tokens now.",
    }
    steps = []
    for i in range(200):
        if i in users:
            steps.append({"user": users[i]})
        steps.append({"tool": "fetch_document",
                      "args": {"tokens": 1600, "topic": f"{TOPICS[i % len(TOPICS)]} #{i + 1}"}})
    steps.append({"final": "| source | key figure |\n|---|---|\n| 200 documents | see notes |\n\n"
                           "摘要：两百轮检索完成，数据截止到2026年10月31日。"})
    return {"name": "long-200", "window": 128000,
            "tools": ["fetch_document", "recall", "read_ref", "notes"],
            "goal": "Read 200 documents on the energy transition and write a report.",
            "expect": {"tier1": ["must include a table", "数据必须截止到2026年10月31日",
                                 "at most 80k"]},
            "steps": steps}


def long_1000() -> dict:
    """1000 rounds written compactly with `repeat` steps (docs/SCENARIOS.md)."""
    fetch = {"tool": "fetch_document", "args": {"tokens": 1600, "topic": "energy source #{n}"}}
    steps = [{"repeat": 1, "from": 1, **fetch},
             {"user": "Hard constraints: the final report must include a table. "
                      "The budget is at most 50k tokens."},
             {"repeat": 399, "from": 2, **fetch},
             {"user": "另外，数据必须截止到2026年10月31日。报告一定要用中文写摘要。"},
             {"repeat": 200, "from": 401, **fetch},
             {"user": "Change of plan: the budget is at most 80k tokens now."},
             {"repeat": 400, "from": 601, **fetch},
             {"final": "| source | key figure |\n|---|---|\n| 1000 documents | see notes |\n\n"
                       "摘要：一千轮检索完成，数据截止到2026年10月31日。"}]
    return {"name": "long-1000", "window": 128000,
            "tools": ["fetch_document", "recall", "read_ref", "notes"],
            "goal": "Read 1000 documents on the energy transition and write a report.",
            "expect": {"tier1": ["must include a table", "数据必须截止到2026年10月31日",
                                 "at most 80k"]},
            "steps": steps}


if __name__ == "__main__":
    for scenario in (retrieval(), long_200(), long_1000()):
        path = OUT / f"{scenario['name']}.json"
        path.write_text(json.dumps(scenario, ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")
        print("wrote", path)
