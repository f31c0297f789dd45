"""Chaos run (issue 9): sessions on the real stack while workers, Redis and PostgreSQL are
killed.

`scripts/chaos.py` is the command. `stack` starts and kills the processes (`postgres` the
run's own cluster, issue 25's Done when), `scenario`
writes the default scenario, `run` drives the kills by a seeded schedule, `compare` checks
every finished session against an uninterrupted run, `report` totals and prints the verdict,
`this_process` points the driving process at the run's Redis and database.
"""
