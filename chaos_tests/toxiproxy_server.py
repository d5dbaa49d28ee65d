"""The toxiproxy server the chaos suite drives, always through the real ``toxiproxy-python`` client.

In order of preference: the server at ``TOXIPROXY_URL``; a ``toxiproxy-server`` binary on
PATH, started here; the API-compatible stand-in this suite ships (``toxiproxy_standin.py``),
for machines such as this one where no registry carries the binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from toxiproxy import Toxiproxy

from testkit.process_cluster import free_ports

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toxiproxy_standin.py")


@dataclass
class ToxiproxyServer:
    client: Toxiproxy
    kind: str  # "external", "toxiproxy-server" or "stand-in"
    url: str
    proc: subprocess.Popen | None = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def launch(log_path: str | None = None, timeout_s: float = 15.0) -> ToxiproxyServer:
    """Find or start a toxiproxy server and wait until it answers."""
    url = os.environ.get("TOXIPROXY_URL")
    proc = None
    if url:
        kind = "external"
    else:
        (port,) = free_ports(1)
        url = f"http://127.0.0.1:{port}"
        binary = shutil.which("toxiproxy-server")
        if binary:
            kind, cmd = "toxiproxy-server", [binary, "-host", "127.0.0.1", "-port", str(port)]
        else:
            kind, cmd = "stand-in", [sys.executable, STANDIN, "--port", str(port)]
        with open(log_path or os.devnull, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    parts = urlsplit(url)
    client = Toxiproxy()
    client.update_api_consumer(parts.hostname, parts.port or 8474)
    server = ToxiproxyServer(client, kind, url, proc)
    deadline = time.monotonic() + timeout_s
    while not _answers(client):
        if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
            server.stop()
            raise RuntimeError(f"toxiproxy ({kind}) at {url} did not answer")
        time.sleep(0.05)
    return server


def _answers(client: Toxiproxy) -> bool:
    try:
        return bool(client.running())
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False
