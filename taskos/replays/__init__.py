"""Replays of recorded sessions (feature E2) and the comparison of runs of one task.

sessions.py creates a replay session and gives the worker its engine (the recorded
decisions, read back from the stored events and the archive); compare.py reports on the
recorded session and its replays from their stored events and finds where their contexts
part.
"""
