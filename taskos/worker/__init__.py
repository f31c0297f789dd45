"""The worker side: the Celery task that runs a session, and one executor per session.

tasks.py registers run_session under the name taskos/runs/queue.py sends; execute.py runs a
session (or, headless, a session and its sub-agents) through the engine with the Django
store and the event sink; lease.py keeps one executor per session; sweeper.py queues again
the sessions nobody runs.
"""
