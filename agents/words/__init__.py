"""The person's words and the anchors read from them (features C8, C19).

`person` keeps every message the person wrote in every request; `in_force` reads from
their sentences what the snapshot lists as in force, possibly changed or possibly
contradicting; `anchors` and `patterns` extract hard constraints and details from them
(labels, never what is listed), `conclusions` the findings of tool results; `merge` keeps
the anchor set current and `book` keeps it in step with the Store and people's edits.
"""
from agents.words.anchors import extract_anchors, supersedes
from agents.words.book import AnchorBook
from agents.words.person import PersonWords

__all__ = ["AnchorBook", "PersonWords", "extract_anchors", "supersedes"]
