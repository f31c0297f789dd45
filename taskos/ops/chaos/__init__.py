"""Chaos run (issue 9): sessions on the real stack while workers and Redis are killed.

`scripts/chaos.py` is the command. `stack` starts and kills the processes, `scenario`
writes the default scenario, `run` drives the kills by a seeded schedule, `compare` checks
every finished session against an uninterrupted run, `report` totals and prints the verdict,
`this_process` points the driving process at the run's Redis and database.
"""
