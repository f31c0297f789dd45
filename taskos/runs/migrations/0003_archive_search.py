"""Full-text index over ArchivedTurn.search_text, one flavour per database vendor.

SQLite: an FTS5 table over (session_id, search_text) whose rowid is the ArchivedTurn id,
kept in sync by triggers. PostgreSQL: a generated tsvector column built from the words
as they are (no parser, no stemming: CJK characters and snake_case names stay intact)
with a GIN index. Other vendors get no index and fall back to a LIKE scan in the store.
"""
from django.db import migrations

SQLITE_FORWARD = [
    """CREATE VIRTUAL TABLE runs_archivedturn_fts USING fts5(
           session_id, search_text,
           content='runs_archivedturn', content_rowid='id',
           tokenize="unicode61 tokenchars '_'", detail=column)""",
    """CREATE TRIGGER runs_archivedturn_fts_insert AFTER INSERT ON runs_archivedturn BEGIN
           INSERT INTO runs_archivedturn_fts(rowid, session_id, search_text)
           VALUES (new.id, new.session_id, new.search_text);
       END""",
    """CREATE TRIGGER runs_archivedturn_fts_delete AFTER DELETE ON runs_archivedturn BEGIN
           INSERT INTO runs_archivedturn_fts(runs_archivedturn_fts, rowid, session_id, search_text)
           VALUES ('delete', old.id, old.session_id, old.search_text);
       END""",
    """CREATE TRIGGER runs_archivedturn_fts_update AFTER UPDATE ON runs_archivedturn BEGIN
           INSERT INTO runs_archivedturn_fts(runs_archivedturn_fts, rowid, session_id, search_text)
           VALUES ('delete', old.id, old.session_id, old.search_text);
           INSERT INTO runs_archivedturn_fts(rowid, session_id, search_text)
           VALUES (new.id, new.session_id, new.search_text);
       END""",
    # Index whatever was archived before this migration.
    "INSERT INTO runs_archivedturn_fts(runs_archivedturn_fts) VALUES ('rebuild')",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS runs_archivedturn_fts_insert",
    "DROP TRIGGER IF EXISTS runs_archivedturn_fts_delete",
    "DROP TRIGGER IF EXISTS runs_archivedturn_fts_update",
    "DROP TABLE IF EXISTS runs_archivedturn_fts",
]

POSTGRES_FORWARD = [
    """ALTER TABLE runs_archivedturn ADD COLUMN search_vector tsvector
           GENERATED ALWAYS AS (
               array_to_tsvector(array_remove(string_to_array(search_text, ' '), ''))
           ) STORED""",
    "CREATE INDEX runs_archive_search_gin ON runs_archivedturn USING gin (search_vector)",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS runs_archive_search_gin",
    "ALTER TABLE runs_archivedturn DROP COLUMN IF EXISTS search_vector",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_default_profile")]
    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
