"""Keyword search over a session's archive, on the full-text index of migration 0003.

Ranking: more query words matched first (rows holding all of them lead), ties to the
newest row (a later result usually supersedes an earlier one). Partial matches are
ranked among a bounded pool of the newest candidates, so a query costs about the same
on a session of 100 rows or 100 000, whatever the words' frequency. Rows the engine
archived since the session's last search are indexed first (index_pending).
"""
from __future__ import annotations

from django.db import connection, transaction
from django.db.models.functions import Substr

from agents import ArchiveHit, excerpt_around, keywords
from taskos.runs.models import MAX_INDEXED_CHARS, MAX_INDEXED_WORD, ArchivedTurn, search_terms

MAX_QUERY_WORDS = 12
# Partial matches are ranked among this many newest candidates.
PARTIAL_POOL = 200
# PostgreSQL: the newest rows scored directly before the GIN index is asked about older ones.
RECENT_WINDOW = 500
# PostgreSQL: a word in at least this share of the newest rows counts as dense.
DENSE_SHARE = 0.3
# Dropped from a query that has other words: they match nearly every row and would push
# the rows that hold the meaningful words out of the candidate pool.
STOP_WORDS = frozenset(
    "a an and are as at be by did do does for from had has have how in is it of on or "
    "that the this to was were what when where which who why with".split())


def query_words(query: str) -> list[str]:
    words = sorted(w for w in keywords(query) if len(w) <= MAX_INDEXED_WORD)
    meaningful = [w for w in words if w not in STOP_WORDS]
    return (meaningful or words)[:MAX_QUERY_WORDS]


def matched_count(search_text: str, words: list[str]) -> int:
    padded = f" {search_text} "  # search_text is single-space separated words
    return sum(1 for w in words if f" {w} " in padded)


def _rank_pool(scores: dict[int, int], limit: int) -> list[int]:
    return sorted(scores, key=lambda pk: (-scores[pk], -pk))[:limit]


def _search_texts(ids) -> dict[int, str]:
    return dict(ArchivedTurn.objects.filter(pk__in=list(ids)).values_list("id", "search_text"))


# --- SQLite: FTS5 walks its index newest-first and stops at LIMIT, for AND and OR alike.
def _fts5_newest(session_pk: int, words: list[str], joiner: str, limit: int) -> list[int]:
    # Words come from keywords(): letters, digits, "_" and CJK only, so quoting is safe.
    match = (f'session_id:"{session_pk}" AND search_text:('
             + f" {joiner} ".join(f'"{w}"' for w in words) + ")")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rowid FROM runs_archivedturn_fts WHERE runs_archivedturn_fts MATCH %s "
            "ORDER BY rowid DESC LIMIT %s", [match, limit])
        return [row[0] for row in cursor.fetchall()]


def _rank_sqlite(session_pk: int, words: list[str], limit: int) -> list[int]:
    ranked = _fts5_newest(session_pk, words, "AND", limit)
    if len(ranked) == limit or len(words) == 1:
        return ranked
    pool = set(_fts5_newest(session_pk, words, "OR", PARTIAL_POOL + len(ranked))) - set(ranked)
    scores = {pk: matched_count(text, words) for pk, text in _search_texts(pool).items()}
    return ranked + _rank_pool(scores, limit - len(ranked))


# --- PostgreSQL: GIN finds rare words at once but cannot return rows newest-first, a word
# present in most rows makes every GIN lookup that includes it slow, and checking a tsvector
# row by row costs microseconds each. So: score the newest rows directly (dense words are
# settled there), and ask GIN about older rows with the sparse words only, checking the
# dense ones on the few rows it returns.
def _postgres_older(session_pk: int, sparse: list[str], dense: list[str], below_id: int,
                    limit: int) -> list[int]:
    # Lexemes are given as they are (no parser); keywords() made them, so quoting is safe.
    tsquery = " & ".join(f"'{w}'" for w in sparse)
    # strpos() cannot use an index, so the dense words stay a filter on GIN's few rows.
    dense_sql = "".join(" AND strpos(' ' || search_text || ' ', %s) > 0" for _ in dense)
    with connection.cursor() as cursor:
        # "+ 0" hides session_id and id from the btree indexes, so the planner reads the
        # GIN index alone instead of walking every older row of the session in id order
        # (or AND-ing GIN with a bitmap of the whole session).
        cursor.execute(
            "SELECT id FROM runs_archivedturn WHERE session_id + 0 = %s AND id + 0 < %s "
            f"AND search_vector @@ %s::tsquery{dense_sql} ORDER BY id + 0 DESC LIMIT %s",
            [session_pk, below_id, tsquery, *[f" {w} " for w in dense], limit])
        return [row[0] for row in cursor.fetchall()]


def _rank_postgres(session_pk: int, words: list[str], limit: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, search_text FROM runs_archivedturn WHERE session_id = %s "
                       "ORDER BY id DESC LIMIT %s", [session_pk, RECENT_WINDOW])
        window = cursor.fetchall()
    scores, rows_with = {}, {w: 0 for w in words}
    for pk, text in window:
        padded = f" {text} "
        present = [w for w in words if f" {w} " in padded]
        scores[pk] = len(present)
        for w in present:
            rows_with[w] += 1
    ranked = [pk for pk, _ in window if scores[pk] == len(words)][:limit]
    if len(window) < RECENT_WINDOW:  # the window is the whole session
        partial = {pk: n for pk, n in scores.items() if 0 < n < len(words)}
        return ranked + _rank_pool(partial, limit - len(ranked))
    oldest = window[-1][0]
    sparse = ([w for w in words if rows_with[w] < DENSE_SHARE * len(window)]
              or [min(words, key=rows_with.get)])
    dense = [w for w in words if w not in sparse]
    if len(ranked) < limit:
        ranked += _postgres_older(session_pk, sparse, dense, oldest, limit - len(ranked))
    if len(ranked) >= limit or len(words) == 1:
        return ranked[:limit]
    partial = {pk: n for pk, n in scores.items() if 0 < n < len(words)}
    if len(partial) < limit - len(ranked):
        # Few partial matches among the newest rows: every word is sparse, GIN is cheap.
        older = {pk for w in words
                 for pk in _postgres_older(session_pk, [w], [], oldest, PARTIAL_POOL)}
        older -= set(ranked)
        partial.update({pk: matched_count(text, words)
                        for pk, text in _search_texts(older).items()})
    return ranked + _rank_pool(partial, limit - len(ranked))


# --- any other database: score every row (correct, slow on big archives).
def _rank_scan(session_pk: int, words: list[str], limit: int) -> list[int]:
    rows = ArchivedTurn.objects.filter(session_id=session_pk).values_list("id", "search_text")
    scores = {pk: n for pk, text in rows.iterator() if (n := matched_count(text, words))}
    return _rank_pool(scores, limit)


def index_pending(session_pk: int) -> int:
    """Index the session's rows archived since its last search (search_pending); their
    count. The engine archives without indexing: a session archives thousands of rows and
    searches a few times, and the index work no longer sits in every turn."""
    pending = list(ArchivedTurn.objects.filter(session_id=session_pk, search_pending=True)
                   .annotate(head=Substr("content", 1, MAX_INDEXED_CHARS))
                   .values_list("id", "head", "tool_name"))
    if not pending:
        return 0
    table, text, flag = (connection.ops.quote_name(n) for n in (
        ArchivedTurn._meta.db_table, "search_text", "search_pending"))
    with transaction.atomic(), connection.cursor() as cursor:
        # Still pending: a search running beside this one may have indexed them already.
        cursor.executemany(f"UPDATE {table} SET {text} = %s, {flag} = NULL "
                           f"WHERE id = %s AND {flag}",
                           [(search_terms(head, tool_name), pk) for pk, head, tool_name in pending])
    return len(pending)


def search_archive(session_pk: int, query: str, limit: int = 5) -> list[ArchiveHit]:
    """At most `limit` hits for `query` in the session's archive, best first."""
    words = query_words(query)
    if not words or limit <= 0:
        return []
    index_pending(session_pk)
    rank = {"sqlite": _rank_sqlite, "postgresql": _rank_postgres}.get(connection.vendor,
                                                                       _rank_scan)
    ranked = rank(session_pk, words, limit)
    rows = (ArchivedTurn.objects.filter(pk__in=ranked)
            .annotate(head=Substr("content", 1, MAX_INDEXED_CHARS))
            .only("id", "session_id", "turn", "role", "tool_name", "is_binary"))
    by_id = {row.pk: row for row in rows}
    terms = set(words)
    hits = []
    for pk in ranked:
        row = by_id[pk]
        excerpt = row.tool_name if row.is_binary else excerpt_around(row.head, terms)
        hits.append(ArchiveHit(ref=row.ref, turn=row.turn, role=row.role,
                               excerpt=excerpt, tool_name=row.tool_name))
    return hits
