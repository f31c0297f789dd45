"""`python manage.py bench [--json PATH] [--plot PNG] [--recall-rows N] [--summarizer MODE]`:
the engine benchmark (SPEC E1) plus archive-recall latency on the configured database."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agents.bench import run_bench
from taskos.runs.recall_bench import measure


class Command(BaseCommand):
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
        parser.add_argument("--summarizer", choices=("faithful", "lossy", "hostile"),
                            default=None, help="summary mode of the simulated model in the "
                                               "managed runs (default: faithful); the targets "
                                               "must hold under lossy and hostile too")

    def handle(self, *args, **options):
        rows = options["recall_rows"]
        if 0 < rows < 100:
            raise CommandError("--recall-rows must be 0 (skip) or at least 100.")
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
