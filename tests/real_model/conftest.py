"""The opt-in real-model lane (issue 11): `scripts/test.sh --real-model`.

Every test here is marked `real_model` and skipped unless TASKOS_REAL_MODEL=1: they start
llama-cpp-python's server with SmolLM2-135M-Instruct (taskos.ops.localmodel) and drive
whole sessions on it, minutes each on a small CPU. The server is started once per run;
TASKOS_REAL_MODEL_URL points at one already running instead.
"""
from __future__ import annotations

import os
import socket
import subprocess

import pytest

from taskos.ops.localmodel import (check_server_installed, find_gguf, server_command,
                                   wait_until_ready)

N_CTX = 4096


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TASKOS_REAL_MODEL") == "1":
        return
    skip = pytest.mark.skip(reason="real-model lane: run scripts/test.sh --real-model")
    for item in items:
        if "real_model" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def local_server():
    """The base URL of a llama-cpp-python server with the small model, window 4096."""
    given = os.environ.get("TASKOS_REAL_MODEL_URL")
    if given:
        yield given.rstrip("/")
        return
    check_server_installed()
    port = free_port()
    command = server_command(find_gguf(), port=port, n_ctx=N_CTX,
                             threads=int(os.environ.get("TASKOS_REAL_MODEL_THREADS", "2")))
    log = open(os.environ.get("TASKOS_REAL_MODEL_LOG", os.devnull), "w")
    process = subprocess.Popen(command + ["--verbose", "false"], stdout=log, stderr=log,
                               stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_ready(base_url, process, 180)
        yield base_url
    finally:
        stop_server(process)
        log.close()


def stop_server(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds: uvicorn's graceful stop waits for the
    request in flight, and llama-cpp-python computes a whole answer in a worker thread
    that nothing interrupts (at load 11 one answer took longer than the 30 s once waited)."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)
