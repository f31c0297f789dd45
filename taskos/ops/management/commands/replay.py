"""`python manage.py replay SESSION_ID [--set key=value …] [--profile NAME] [--json]` (E2).

Replays the recorded session's decisions under other context settings or another profile,
in this process, as a new session; prints the runtask report keys of the replay plus the
differences against the recorded session and the first turn where their contexts differ.
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from taskos.ops.management.commands.runtask import ProgressBar
from taskos.ops.management.migrated import require_migrated
from taskos.ops.management.storage import StorageErrorsInOneLine, run_failed
from taskos.replays.compare import compare, difference_text
from taskos.replays.sessions import create_replay, parse_settings
from taskos.runs.models import ModelProfile, Session
from taskos.runs.services import SessionError
from taskos.worker.execute import HEADLESS_PATIENCE_S, execute_session
from taskos.worker.lease import headless_lease


class Command(StorageErrorsInOneLine, BaseCommand):
    help = "Replay a recorded session under other settings and compare it with the original."

    def add_arguments(self, parser):
        parser.add_argument("session_id", type=int, help="the recorded session's number")
        parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                            help="a context setting to change, e.g. trigger_ratio=0.6 or "
                                 "window=32000 (repeatable)")
        parser.add_argument("--profile", default=None,
                            help="model profile for the replay (default: the recorded one)")
        parser.add_argument("--json", action="store_true",
                            help="print the report as one JSON object on stdout")

    def handle(self, *args, **options):
        require_migrated()
        source = Session.objects.select_related("profile").filter(
            pk=options["session_id"]).first()
        if source is None:
            raise CommandError(f"No session #{options['session_id']}.")
        profile = None
        if options["profile"]:
            profile = ModelProfile.objects.filter(name=options["profile"]).first()
            if profile is None:
                names = ", ".join(ModelProfile.objects.values_list("name", flat=True))
                raise CommandError(f"No model profile {options['profile']!r}. Profiles: {names}.")
        try:
            replay = create_replay(source, None, parse_settings(options["set"]), profile)
        except SessionError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Replay #{replay.pk} of session #{source.pk} "
                          f"(window {replay.window}, profile {replay.profile.name})")
        try:
            with headless_lease(replay.pk) as lease:  # no worker's sweep runs it as well
                report = execute_session(replay, progress=ProgressBar(self.stderr._out),
                                         lease=lease, patience=HEADLESS_PATIENCE_S)
        except Exception as exc:  # noqa: BLE001 - recorded on the session already
            raise run_failed(f"Replay #{replay.pk}", exc) from exc
        replay.refresh_from_db()
        compared = compare(source, [replay])["replays"][0]
        out = {**report, **{k: compared[k] for k in (
            "session", "summary_calls", "cached_tokens", "cached_share", "cache_read_tokens",
            "cache_write_tokens", "cost",
            "audit_failures", "differences", "first_difference")}, "replay_of": source.pk}
        if options["json"]:
            self.stdout.write(json.dumps(out, default=str))
            return
        self.stdout.write(f"Replay #{replay.pk} of #{source.pk}: {replay.status} after "
                          f"{replay.turns} turns")
        for key, diff in out["differences"].items():
            self.stdout.write(f"  {key:22} {diff['source']!s:>12} -> {diff['replay']!s:>12}")
        first = out["first_difference"]
        self.stdout.write(f"  {difference_text(first)}")
