"""Commands that read and write the database say so when it was never migrated.

`taskos` migrates on every start; `runtask`, `bench` and `replay` run on their own and,
on a fresh checkout, would otherwise end in "no such table: runs_modelprofile"."""
from __future__ import annotations

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor


def require_migrated(using: str = DEFAULT_DB_ALIAS) -> None:
    connection = connections[using]
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        name = connection.settings_dict.get("NAME")
        raise CommandError(
            f"The database {name} has {len(plan)} migration(s) not applied yet. Run "
            "`python manage.py migrate` first (the `taskos` command does it on every start).")
