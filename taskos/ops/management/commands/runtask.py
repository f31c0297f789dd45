"""`python manage.py runtask (--scenario NAME_OR_PATH | --goal TEXT) [--profile NAME]
[--window N] [--max-turns N] [--tools a,b] [--set KEY=VALUE ...] [--file PATH ...] [--json]`
(feature W7, issue 11)."""
from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from taskos.ops.management.migrated import require_migrated
from taskos.ops.management.storage import StorageErrorsInOneLine, run_failed
from taskos.replays.sessions import parse_settings
from taskos.runs.models import ModelProfile, Session
from taskos.runs.services import SessionError, create_session
from taskos.runs.tool_sources import ToolSource
from taskos.worker.execute import execute_tree
from taskos.workspaces.files import add_files, command_line_items
from taskos.workspaces.intake import UploadRefused


class ProgressBar:
    """progress(done, total) callback drawing a bar on stderr."""

    def __init__(self, stream=None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_tenth = -1

    def __call__(self, done: int, total: int) -> None:
        total = max(int(total or 0), 1)
        done = min(max(int(done or 0), 0), total)
        filled = self.width * done // total
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} steps"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done == total else ""))
        else:
            tenth = 10 * done // total  # a line per 10 % when the output is a log
            if tenth == self._last_tenth:
                return
            self._last_tenth = tenth
            self.stream.write(line + "\n")
        self.stream.flush()


# The exit code of a session that ran to an end other than an answer, so a script tells a
# weak model's non-answer from a crash or a provider's fault without reading the report.
# 1 stays Django's: the command itself could not run (bad option, unknown profile, storage).
ENDING_CODES = {Session.Status.FAILED: 2, Session.Status.UNUSABLE_ANSWER: 3,
                Session.Status.CANCELLED: 4,
                # not ended: a person decides its ask-first call in the drawer (T11)
                Session.Status.WAITING_FOR_APPROVAL: 5}


def ended_without_answer(session: Session) -> CommandError | None:
    """The CommandError (with its exit code) for a session that did not finish, else None."""
    code = ENDING_CODES.get(session.status)
    if code is None:
        return None
    if session.status == Session.Status.WAITING_FOR_APPROVAL:
        return CommandError(
            f"Session #{session.pk} waits for a person's approval of a tool call: approve or "
            f"deny it in the drawer's Approvals panel (/sessions/{session.pk}/); a worker then "
            "goes on with it.", returncode=code)
    reason = f": {session.error}" if session.error else ""
    return CommandError(f"Session #{session.pk} ended {session.status}{reason}",
                        returncode=code)


def tool_sources_named(names: list[str]) -> list[ToolSource]:
    """The enabled tool sources named by --tool-source; an unknown name is refused before
    any session exists."""
    sources = list(ToolSource.objects.filter(name__in=names, enabled=True))
    unknown = sorted(set(names) - {source.name for source in sources})
    if unknown:
        known = ", ".join(ToolSource.objects.filter(enabled=True)
                          .values_list("name", flat=True)) or "none"
        raise CommandError(f"--tool-source: no enabled tool source {', '.join(unknown)}. "
                           f"Enabled sources: {known}.")
    return sources


class Command(StorageErrorsInOneLine, BaseCommand):
    help = "Run a scenario headless through the engine, in this process."

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--scenario",
                            help="name of a bundled scenario or path to a scenario JSON file")
        source.add_argument("--goal", help="a free goal, run on the profile's model (on the "
                                           "simulated model: a generic plan)")
        parser.add_argument("--max-turns", type=int, default=None,
                            help="turns before the session stops without an answer")
        parser.add_argument("--tools", default=None,
                            help="comma-separated tool names offered (default: all, or the "
                                 "scenario's); small windows need few")
        parser.add_argument("--window", type=int, default=None,
                            help="context window in tokens (default: the scenario's, else "
                                 "the profile's)")
        parser.add_argument("--profile", default="sim", help="model profile name (sim)")
        parser.add_argument("--summarizer", choices=("faithful", "lossy", "hostile"),
                            default=None, help="summary mode of the simulated model (default: "
                                               "the scenario's, else faithful)")
        parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                            help="a context setting, as replay --set takes them, e.g. "
                                 "clear_tool_results=false (repeatable)")
        parser.add_argument("--file", action="extend", nargs="+", default=[], metavar="PATH",
                            help="files or folders put into the session's workspace before "
                                 "it starts (a .zip is unpacked; repeatable; T9)")
        parser.add_argument("--tool-source", action="append", default=[], metavar="NAME",
                            help="an enabled tool source (an MCP server, T10) whose tools are "
                                 "offered (repeatable)")
        parser.add_argument("--json", action="store_true",
                            help="print the run report as one JSON object on stdout")

    def handle(self, *args, **options):
        require_migrated()
        profile = ModelProfile.objects.filter(name=options["profile"]).first()
        if profile is None:
            names = ", ".join(ModelProfile.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No model profile {options['profile']!r}. Profiles: {names}.")
        sources = tool_sources_named(options["tool_source"])
        try:  # checked before the session exists: a refused file leaves nothing behind
            incoming = command_line_items(options["file"])
        except UploadRefused as exc:
            raise CommandError(f"--file: {exc}") from None
        try:
            settings = parse_settings(options["set"])
            window = settings.pop("window", None)
            if options["window"] is not None:
                window = options["window"]
            if options["max_turns"] is not None:  # 0 is refused by its range, not dropped
                settings["max_turns"] = options["max_turns"]
            if options["tools"]:
                settings["tools"] = [t.strip() for t in options["tools"].split(",") if t.strip()]
            session = create_session(owner=None, goal=options["goal"] or "",
                                     scenario=options["scenario"] or "", profile=profile,
                                     window=window, context_settings=settings)
        except SessionError as exc:
            raise CommandError(str(exc)) from None
        if incoming:
            try:
                add_files(session, incoming)
            except UploadRefused as exc:
                session.delete()
                raise CommandError(f"--file: {exc}") from None
            self.stderr.write(f"Workspace: {len(incoming)} file(s) added from --file.")
        session.tool_sources.set(sources)
        self.stderr.write(f"Session #{session.pk} on {profile}: {session.goal[:200]} "
                          f"(window {session.window})")
        if session.tools_off_notice:  # the profile's model check found no tools rendered
            self.stderr.write(session.tools_off_notice)
        try:
            # Sub-agents run here too, one after another, each as its own session row.
            report = execute_tree(session, progress=ProgressBar(self.stderr._out),
                                  summarizer=options["summarizer"])
        except Exception as exc:  # noqa: BLE001 - recorded on the session already
            raise run_failed(f"Session #{session.pk}", exc) from exc
        if report.get("children"):
            session.refresh_from_db()
            report["children"]["cost_with_children"] = round(session.cost_with_children(), 6)
        session.refresh_from_db()
        if options["json"]:
            self.stdout.write(json.dumps(report, default=str))
            self.exit_for(session)
            return
        self.stdout.write(f"Session #{session.pk} {session.status} after {session.turns} turns")
        for key in ("total_input_tokens", "peak_input_tokens", "compactions",
                    "over_window_requests", "anchor_survival", "audit_failures",
                    "unsupported_figures", "person_words_kept", "superseded_listed",
                    "quoted_promoted", "tool_text_in_constraints",
                    "engine_ms_per_call", "count_source", "token_ratio",
                    "token_overheads", "summaries"):
            self.stdout.write(f"  {key:22} {report.get(key)}")
        for probe in report.get("probe_recovery") or ():
            rate = "not asked: " + probe.get("error", "") if probe.get("rate") is None \
                else f"{probe['recovered']}/{probe['asked']} recovered ({probe['rate']:.0%})"
            self.stdout.write(f"  probes after compaction {probe['compaction']} (turn "
                              f"{probe['turn']}): {rate}")
        if report.get("summaries", {}).get("fallback"):
            self.stdout.write(f"  {report['summaries']['fallback']} model summaries were "
                              "unusable: those compactions truncated instead (see the drawer)")
        if session.final_answer:
            self.stdout.write("\n" + session.final_answer)
        self.exit_for(session)

    @staticmethod
    def exit_for(session: Session) -> None:
        """Exit 0 when the session finished with an answer; else ENDING_CODES' code."""
        ended = ended_without_answer(session)
        if ended is not None:
            raise ended
