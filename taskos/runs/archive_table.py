"""The archive table (feature C5): every raw message and tool output, with its search terms."""
from __future__ import annotations

from django.db import models

from agents import keywords

# Words longer than this are ids, hashes or base64 runs: nobody searches for them by
# keyword and they would only bloat the full-text index.
MAX_INDEXED_WORD = 64
# Only the start of a huge tool result is indexed; the whole of it stays in `content`.
MAX_INDEXED_CHARS = 200_000


def search_terms(content: str, tool_name: str = "", is_binary: bool = False) -> str:
    """The space-separated keywords the full-text index sees (CJK characters one by one)."""
    words = keywords(tool_name)
    if not is_binary:
        words |= keywords(content[:MAX_INDEXED_CHARS])
    return " ".join(sorted(w for w in words if len(w) <= MAX_INDEXED_WORD))


class ArchivedTurn(models.Model):
    """One raw message or tool output, append-only and never truncated (feature C5).

    `search_text` feeds the full-text index created in migration 0003 (an FTS5 table kept
    in sync by triggers on SQLite, a generated tsvector column with a GIN index on
    PostgreSQL). A later migration that rebuilds this table on SQLite drops those triggers:
    re-create them there (see 0003) or search stops finding new rows.
    """

    session = models.ForeignKey("runs.Session", on_delete=models.CASCADE,
                                related_name="archive")
    turn = models.PositiveIntegerField()
    role = models.CharField(max_length=20)
    content = models.TextField()
    tool_name = models.CharField(max_length=100, blank=True)
    tool_args = models.JSONField(default=dict, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    is_binary = models.BooleanField(default=False, help_text="content is base64")
    search_text = models.TextField(blank=True, editable=False)
    # True while the row's words are not in the full-text index yet. The engine archives a
    # turn's rows without them (reading ~200 words out of a result and indexing them was a
    # third of a turn's database time); the session's next search indexes them first
    # (taskos/store/search.py), as the in-memory store does. NULL once indexed, as every
    # row saved through the ORM is.
    search_pending = models.BooleanField(null=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "turn"], name="runs_archive_session_turn"),
                   # newest-first walks within one session (search on dense words)
                   models.Index(fields=["session", "id"], name="runs_archive_session_id"),
                   models.Index(fields=["session"], condition=models.Q(search_pending=True),
                                name="runs_archive_search_pending")]

    def __str__(self) -> str:
        return f"turn {self.turn} {self.role} {self.tool_name}".strip()

    @property
    def ref(self) -> str:
        return f"arc:{self.session_id}:{self.pk}"

    def save(self, *args, **kwargs) -> None:
        if not self.search_text:
            self.search_text = search_terms(self.content, self.tool_name, self.is_binary)
        self.search_pending = None
        super().save(*args, **kwargs)
