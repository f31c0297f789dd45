"""The web server the run command starts (taskos/ops/web.py) accepts a browser's
permessage-deflate offer, so the drawer's frames travel deflated; a client that offers
nothing gets plain frames."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from taskos.ops.launcher import port_answers
from tests.browser.stack import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
HANDSHAKE = ("GET /ws/sessions/1/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
             "Origin: http://127.0.0.1:{port}\r\n{extensions}\r\n")


@pytest.fixture
def web_port(tmp_path):
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "taskos.settings",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'taskos.sqlite3'}",
           "TASKOS_ALLOWED_HOSTS": "127.0.0.1"}
    with open(tmp_path / "web.log", "wb") as log:
        web = subprocess.Popen([sys.executable, "-m", "taskos.ops.web", "-b", "127.0.0.1",
                                "-p", str(port), "taskos.asgi:application"], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: port_answers("127.0.0.1", port), "the web server", web)
        yield port
    finally:
        web.terminate()
        web.wait(timeout=20)


def handshake_headers(port: int, extensions: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(HANDSHAKE.format(port=port, extensions=extensions).encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()


def test_a_browsers_deflate_offer_is_accepted(web_port):
    headers = handshake_headers(
        web_port, "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n")
    assert headers.startswith("http/1.1 101")
    assert "sec-websocket-extensions: permessage-deflate" in headers


def test_a_client_offering_nothing_gets_plain_frames(web_port):
    headers = handshake_headers(web_port, "")
    assert headers.startswith("http/1.1 101")
    assert "sec-websocket-extensions" not in headers
