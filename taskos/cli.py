"""The `taskos` console script: the same as `python manage.py up [options]`."""
from __future__ import annotations

import os
import sys

from django.core.management import execute_from_command_line


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]) or not args or args[0].startswith("-"):
        execute_from_command_line(["taskos", "up", *args])
    else:
        # `taskos migrate`, `taskos runtask ...`: any other manage.py command.
        execute_from_command_line(["taskos", *args])


if __name__ == "__main__":
    main()
