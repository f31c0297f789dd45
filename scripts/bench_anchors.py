"""Time anchor extraction on 20 000-character messages (issue 13: linear, well under 50 ms).

Prints one line per input: characters, best-of-N CPU milliseconds (process time, so a busy
machine inflates it less than wall time), anchors found. Timing is
here and not in the tests, which must not depend on a busy machine's speed.

    .venv/bin/python scripts/bench_anchors.py [repeats]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.words.anchors import extract_anchors  # noqa: E402

SIZE = 20_000
INPUTS = {
    # Ordinary messages.
    "prose": "The data shows growth in the region and the team reviewed it carefully. ",
    "prose-no-breaks": "word ",
    "commas": "alpha beta gamma, ",
    "mixed-constraints": "Please read the files first. Do not delete any files. The budget is "
                         "at most 50k tokens. We met on Monday and talked about it. ",
    "chinese": "我们先读一下数据文件，然后写一份简短的报告。预算不超过5万，不要删除文件。",
    # Pathological: a trigger word every few characters and no sentence break at all
    # (the "deadline" input took 28.7 s before issue 13).
    "deadline-no-breaks": "deadline up to at most 5 under 3 ",
    "dates-no-breaks": "1 2 3 4 5 by 2025-01-01 ",
    "before-no-breaks": "before 2025-01-01 at most 5 ",
    # Dense: a hard constraint in every sentence (hundreds of anchors).
    "dense-constraints": "Do not delete any files, the budget is at most 50k tokens, "
                         "always answer in German. ",
    "dense-chinese": "不要删除文件，预算不超过5万，必须用中文回答。",
}


def main(repeats: int = 5) -> None:
    for name, unit in INPUTS.items():
        text = (unit * (SIZE // len(unit) + 1))[:SIZE]
        best, found = float("inf"), 0
        for _ in range(repeats):
            started = time.process_time()
            found = len(extract_anchors(text))
            best = min(best, time.process_time() - started)
        print(f"{name:20s} {len(text):6d} chars {best * 1000:8.1f} ms {found:5d} anchors")
    # Linear: doubling the text doubles the time (quadratic would quadruple it).
    for name in ("deadline-no-breaks", "dense-constraints"):
        times = []
        for size in (5_000, 10_000, 20_000, 40_000):
            text = (INPUTS[name] * (size // len(INPUTS[name]) + 1))[:size]
            best = float("inf")
            for _ in range(repeats):
                started = time.process_time()
                extract_anchors(text)
                best = min(best, time.process_time() - started)
            times.append(f"{size // 1000}k {best * 1000:.1f} ms")
        print(f"{name:20s} scaling: " + ", ".join(times))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
