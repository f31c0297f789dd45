"""Operations: running TaskOS and measuring it, apart from the app it runs.

The launcher behind `taskos` / `manage.py up` (Redis, a Celery worker and daphne, supervised
together), the local real-model lane (localmodel), the database benches (db_path_bench,
recall_bench), the chaos run (chaos/, driven by scripts/chaos.py) and the management
commands up, bench, localmodel, runtask and replay.
"""
