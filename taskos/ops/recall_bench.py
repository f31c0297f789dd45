"""Recall latency on the configured database: archive search over a large session.

`measure(n)` fills a throwaway session with `n` synthetic archived turns (English-like
words with a Zipf frequency curve, tool names, some Chinese sentences), times 50
searches for words that occur in it, deletes the session again and reports p50/p95.
"""
from __future__ import annotations

import random
import statistics
import time

from django.db import connection, transaction

from taskos.runs.models import ArchivedTurn, ModelProfile, Session, search_terms
from taskos.store.django_store import DjangoStore

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "pe", "da", "go", "shi",
             "an", "er", "ol", "un", "ta", "ri", "zo", "be")
DOMAIN_WORDS = ("revenue", "region", "quarter", "missing", "ratio", "sales", "forecast",
                "budget", "anomaly", "customer", "churn", "margin", "inventory", "report")
CJK_CHARS = "销售额区域季度缺失值比例预测预算异常客户流失利润库存报告数据分析增长下降同比环比"
TOOLS = ("csv_describe", "group_by", "top_k", "read_file", "fetch_document", "sql_query")
BATCH = 2000
QUERIES = 50
WARMUP = 5


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    words = set(DOMAIN_WORDS)
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered


def _row_text(rng: random.Random, vocab: list[str], cum_weights: list[float]) -> str:
    words = rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(40, 160))
    text = " ".join(words)
    if rng.random() < 0.1:
        text += " " + "".join(rng.choice(CJK_CHARS) for _ in range(rng.randint(8, 30)))
    if rng.random() < 0.3:
        text += f" value={rng.randint(0, 99999)} share={rng.random():.3f}"
    return text


def _build(session: Session, n: int, rng: random.Random) -> list[str]:
    """Insert n rows; return a sample of their texts to draw queries from."""
    vocab = _vocabulary(rng)
    total, cum_weights = 0.0, []
    for rank in range(1, len(vocab) + 1):
        total += 1 / rank ** 1.07
        cum_weights.append(total)
    samples: list[str] = []
    for start in range(0, n, BATCH):
        rows = []
        for i in range(start, min(start + BATCH, n)):
            role = ("user", "assistant", "tool")[i % 3]
            tool = rng.choice(TOOLS) if role == "tool" else ""
            text = _row_text(rng, vocab, cum_weights)
            if rng.random() < 0.002:
                samples.append(text)
            rows.append(ArchivedTurn(session=session, turn=i // 3, role=role, content=text,
                                     tool_name=tool, search_text=search_terms(text, tool),
                                     token_count=len(text) // 4))
        with transaction.atomic():
            ArchivedTurn.objects.bulk_create(rows)
    return samples or [rows[-1].content]


def _queries(rng: random.Random, samples: list[str]) -> list[str]:
    queries = []
    for i in range(WARMUP + QUERIES):
        text = rng.choice(samples)
        words = [w for w in text.split() if w.isalpha() and w.isascii()]
        cjk = [ch for ch in text if ch in CJK_CHARS]
        if i % 5 == 4 and len(cjk) >= 2:
            queries.append("".join(rng.sample(cjk, 2)))  # a Chinese two-character query
        else:
            queries.append(" ".join(rng.sample(words, min(len(words), rng.randint(1, 3)))))
    return queries


def measure(n: int = 100_000, seed: int = 7) -> dict:
    """Build a throwaway session of n archived turns, time the searches, clean up."""
    if n < 100:
        raise ValueError(f"The recall benchmark needs at least 100 rows (got {n}).")
    rng = random.Random(seed)
    profile, _ = ModelProfile.objects.get_or_create(
        name="sim", defaults={"model": "taskos-sim", "context_size": 128_000})
    session = Session.objects.create(goal="recall benchmark (throwaway)", profile=profile,
                                     window=profile.effective_window, status="finished")
    store = DjangoStore()
    try:
        started = time.perf_counter()
        samples = _build(session, n, rng)
        with connection.cursor() as cursor:
            # What autovacuum / a periodic ANALYZE does in service, so plans see the rows.
            cursor.execute("ANALYZE runs_archivedturn" if connection.vendor == "postgresql"
                           else "ANALYZE")
        build_s = time.perf_counter() - started
        timings, found = [], 0
        for i, query in enumerate(_queries(rng, samples)):
            t0 = time.perf_counter()
            hits = store.search_archive(str(session.pk), query, limit=5)
            elapsed = (time.perf_counter() - t0) * 1000
            if i >= WARMUP:
                timings.append(elapsed)
                found += bool(hits)
    finally:
        session.delete()
    timings.sort()
    return {"vendor": connection.vendor, "rows": n, "queries": len(timings),
            "queries_with_hits": found, "build_s": round(build_s, 1),
            "p50_ms": round(statistics.median(timings), 2),
            "p95_ms": round(timings[int(0.95 * (len(timings) - 1))], 2),
            "max_ms": round(timings[-1], 2)}
