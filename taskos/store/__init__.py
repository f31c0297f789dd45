"""The engine's persistence over the ORM: the Store (django_store.py) and the event log
(event_log.py).

What the engine writes and reads back through agents' Store protocol and event sink:
DjangoStore, the turn's batch and its statements (batch_writes, turn_sql, row_ids), the
engine state in pieces (state_chunks), model calls stored as what is new (call_messages),
archive search (search), SQLite checkpoints (sqlite_checkpoint), the SQL that writes
the events (event_log; announcing them is the caller's) and the rows read back as the
engine's typed events (stored_events). The models themselves are the runs app's
(taskos/runs/models.py); nothing here knows the worker or the live pages.
"""
