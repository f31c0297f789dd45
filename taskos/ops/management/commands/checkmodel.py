"""`python manage.py checkmodel PROFILE [--json] [--timeout S]`: what the profile's model
server really does (agents.check_model) — reachable, the window it serves, whether its chat
template renders tools, whether tool_choice is honoured, how counting will work and how
fast it is — with a verdict and the fix for each. A finished check is stored with the
profile (the start form shows it; a failed tools verdict starts sessions with tools off).

Exit codes: 0 when nothing failed, 3 when the check finished with a failed verdict, 1
when it could not be done (unknown profile, server down, timeout, an answer no
OpenAI-compatible server gives); then nothing is stored.
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

import agents
from taskos.runs.models import ModelProfile

FAILED_VERDICT = 3


class Command(BaseCommand):
    help = "Check a model profile's server: window, tools, tool_choice, counting, speed."

    def add_arguments(self, parser):
        parser.add_argument("profile", help="the model profile's name")
        parser.add_argument("--json", action="store_true",
                            help="print the result as JSON (an error as {\"error\": …})")
        parser.add_argument("--timeout", type=float, default=None,
                            help="seconds each request may take (default: the profile's "
                                 "read and call timeouts)")

    def handle(self, *args, **options):
        name = options["profile"]
        try:
            row = ModelProfile.objects.get(name=name)
        except ModelProfile.DoesNotExist:
            names = ", ".join(ModelProfile.objects.values_list("name", flat=True)) or "none"
            self._fail(options, name, f"No model profile {name!r}. Profiles: {names}.")
        timeout = options["timeout"]
        if timeout is not None and not 0 < timeout <= 86_400:
            self._fail(options, name, f"--timeout must be more than 0 and at most 86400 "
                                      f"seconds (got {timeout:g}).")
        try:
            result = agents.check_model(row.to_engine(), timeout=timeout)
        except (agents.CheckFailed, agents.ConfigError) as exc:
            self._fail(options, name, str(exc))
        row.store_check(result)
        if options["json"]:
            self.stdout.write(agents.result_json(result))
        else:
            self.stdout.write(agents.format_result(result))
            self.stdout.write(f"\nStored with profile {name!r}.")
        if not result.ok:
            failed = ", ".join(c.label for c in result.capabilities if c.verdict == "fail")
            raise CommandError(f"profile {name!r} failed the check: {failed}.",
                               returncode=FAILED_VERDICT)

    def _fail(self, options, name: str, message: str):
        if options["json"]:
            self.stdout.write(json.dumps({"profile": name, "error": message},
                                         ensure_ascii=False))
        raise CommandError(f"{message} Nothing was stored.")
