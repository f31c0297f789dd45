"""Commands meeting a storage error say it in one line (issue 25 item 7).

A full disk, a read-only or locked database or a PostgreSQL that is gone is not a bug of
the command: a traceback buries what happened and what to do. The line goes to stderr as
Django prints any CommandError ("CommandError: …", exit code 1); `--traceback` or
`--verbosity 3` still show the traceback."""
from __future__ import annotations

from django.core.management.base import CommandError

from taskos.store.storage_errors import storage_problem


class StorageErrorsInOneLine:
    """Mixed in before BaseCommand: a storage error raised anywhere in the command
    (migration check, lookups, the run, the report) becomes a CommandError."""

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except CommandError:
            raise
        except Exception as exc:
            problem = storage_problem(exc)
            if problem is None or options.get("traceback") or options.get("verbosity", 1) >= 3:
                raise
            raise CommandError(problem.line()) from exc


def run_failed(label: str, exc: Exception) -> CommandError:
    """The one line for a run ("Session #3", "Replay #4") that raised `exc`."""
    problem = storage_problem(exc)
    if problem is None:
        return CommandError(f"{label} failed: {type(exc).__name__}: {exc}")
    return CommandError(f"{label} stopped. {problem.line()}")
