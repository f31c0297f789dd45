"""The domain app (label `runs`): sessions and everything that belongs to them.

The models (and their tables and migrations), the admin, model profiles, what the dashboard
does to sessions (services, pins, people's edits), the sub-agent tree (delegation) and
queueing a session for a worker by task name (queue). It imports no other taskos package.
"""
