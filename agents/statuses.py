"""The statuses a session ends with, as the engine reports them and the stores keep them.

`unusable_answer` is a final state of its own, not a kind of `failed`: the model was asked
for its answer, asked again, and still wrote no answer (a greeting, a question back, the
task restated, a copy of the engine's own blocks); the session's error quotes what it
wrote. Kept apart so that a non-answer is never listed as `finished` and a person can tell
a weak model's ending from a crash or a provider's fault (`failed`)."""
from __future__ import annotations

FINISHED = "finished"
FAILED = "failed"
UNUSABLE_ANSWER = "unusable_answer"
CANCELLED = "cancelled"

FINAL_STATUSES = (FINISHED, FAILED, UNUSABLE_ANSWER, CANCELLED)


def ending_of(code: str) -> str:
    """The final status of a run the engine stopped with error `code`."""
    return UNUSABLE_ANSWER if code == UNUSABLE_ANSWER else FAILED
