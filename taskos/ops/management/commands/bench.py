"""`python manage.py bench [--json PATH] [--plot PNG] [--recall-rows N] [--db-runs N]
[--summarizer MODE]`: the engine benchmark (feature E1), then on the configured database the
engine's turn against the same turn in memory, and archive-recall latency."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from agents import Bounds, ConfigError, check_number, run_bench
from taskos.ops import db_path_bench
from taskos.ops.management.migrated import require_migrated
from taskos.ops.management.storage import StorageErrorsInOneLine
from taskos.ops.recall_bench import measure

DB_PATH_TARGET = 2.0  # issue 8: runtask's median turn at most twice the in-memory one
# The options' ranges (issue 25 item 6); 0 skips either part.
RECALL_ROWS = Bounds(100, 10_000_000, whole=True)
DB_RUNS = Bounds(0, 100, whole=True)


class Command(StorageErrorsInOneLine, BaseCommand):
    help = "Run the bundled workloads managed and unmanaged, then time archive recall."

    def add_arguments(self, parser):
        parser.add_argument("--json", dest="json_path", default=None,
                            help="also write all results to this JSON file")
        parser.add_argument("--plot", dest="plot_path", default=None,
                            help="also draw input tokens per call and cumulative cost, "
                                 "TaskOS vs unmanaged, on long-200 into this PNG "
                                 "(needs matplotlib: pip install -e '.[plot]')")
        parser.add_argument("--recall-rows", type=int, default=100_000,
                            help="archived turns in the recall benchmark (100000; 0 skips it)")
        parser.add_argument("--db-runs", type=int, default=3,
                            help="long-200 runs on the configured database and in memory, "
                                 "alternately, for the database path's figures (3; 0 skips)")
        parser.add_argument("--summarizer", choices=("faithful", "lossy", "hostile"),
                            default=None, help="summary mode of the simulated model in the "
                                               "managed runs (default: faithful); the targets "
                                               "must hold under lossy and hostile too")

    def handle(self, *args, **options):
        rows = options["recall_rows"]
        try:
            if rows:
                check_number("--recall-rows (0 skips it)", rows, RECALL_ROWS)
            check_number("--db-runs (0 skips it)", options["db_runs"], DB_RUNS)
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        if options["db_runs"] or rows:
            require_migrated()
        path, plot = options["json_path"], options["plot_path"]
        for target in (path, plot):
            if target and not Path(target).resolve().parent.is_dir():
                raise CommandError(f"Cannot write {target}: its folder does not exist.")
        if plot:
            try:
                import matplotlib  # noqa: F401 - fail before an hour of benchmark, not after
            except ImportError:
                raise CommandError("--plot needs matplotlib: pip install -e '.[plot]'") from None
        results = run_bench(json_path=None, out=self.stdout.write, plot_path=plot,
                            summarizer=options["summarizer"])
        results["summarizer"] = options["summarizer"] or "faithful"
        if options["db_runs"]:
            self.stdout.write(f"\nThe database path: long-200 on {connection.vendor} and in "
                              f"memory, {options['db_runs']} runs each…")
            db_path = db_path_bench.measure(options["db_runs"], out=self.stdout.write)
            results["db_path"] = db_path
            met = "met" if db_path["ratio"] <= DB_PATH_TARGET else "MISSED"
            self.stdout.write(
                f"  median per turn {db_path['ratio']}× the in-memory one (target <= "
                f"{DB_PATH_TARGET}): {met}; {db_path['statements_per_turn']} statements in "
                f"{db_path['queries_per_turn']} queries and {db_path['commits_per_turn']} "
                f"commits per turn")
        if rows:
            self.stdout.write(f"\nArchive recall: {rows} turns in one session, 50 searches…")
            recall = measure(rows)
            results["recall"] = recall
            self.stdout.write(
                f"  {recall['vendor']}: p50 {recall['p50_ms']} ms, p95 {recall['p95_ms']} ms, "
                f"max {recall['max_ms']} ms ({recall['queries_with_hits']}/{recall['queries']} "
                f"queries found rows; building took {recall['build_s']} s)")
        if path:
            Path(path).write_text(json.dumps(results, indent=2, ensure_ascii=False))
            self.stdout.write(f"wrote {path}")
