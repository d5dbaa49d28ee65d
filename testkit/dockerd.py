"""A private Docker engine for the compose test: Debian's ``dockerd`` with its own data
root, exec root, pidfile and socket in one folder under /tmp, no iptables rules and no
bridge (containers here use the host network only). ``stop`` ends it and removes the
folder, images and volumes included.

Why it may not start, in the order it is checked: not root; no ``dockerd`` on PATH
(``make deb-tools`` installs docker.io); the daemon exits or does not answer (its log
says why: a storage driver the filesystem cannot carry, cgroups). Each raises
``RuntimeError`` with the reason and the tail of the daemon's log.
``HOROLOGE_DOCKERD_ARGS`` adds flags, e.g. ``--storage-driver=vfs``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time


class Dockerd:
    def __init__(self, root: str, proc: subprocess.Popen) -> None:
        self.root, self.proc = root, proc
        self.host = f"unix://{root}/docker.sock"
        self.env = {**os.environ, "DOCKER_HOST": self.host}

    @property
    def log_path(self) -> str:
        return os.path.join(self.root, "dockerd.log")

    def log_tail(self, lines: int = 15) -> str:
        """The daemon log's last lines, without the chatter of its gRPC client."""
        with open(self.log_path, errors="replace") as f:
            return "".join([line for line in f if "module=grpc" not in line][-lines:])

    def docker(self, *args: str, timeout: float = 120.0) -> str:
        """Run the docker CLI against this engine; its stdout, or RuntimeError with its stderr."""
        res = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: exit {res.returncode}: {res.stderr.strip()}")
        return res.stdout

    def answers(self) -> bool:
        res = subprocess.run(["docker", "version"], env=self.env, capture_output=True, timeout=10)
        return res.returncode == 0

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM (dockerd stops its containers and its containerd), then remove the folder."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _unmount_below(self.root)  # left by a daemon that could not clean up
        shutil.rmtree(self.root, ignore_errors=True)


def start_dockerd(timeout_s: float = 60.0) -> Dockerd:
    """Start a private engine and wait until it answers; RuntimeError says why it could not."""
    if os.geteuid() != 0:
        raise RuntimeError("dockerd needs root; run the compose test as root")
    binary = shutil.which("dockerd")
    if binary is None:
        raise RuntimeError("no dockerd on PATH: `make deb-tools` installs Debian's docker.io")
    if shutil.which("docker") is None:
        raise RuntimeError("no docker client on PATH: `make deb-tools` installs Debian's docker.io")
    # Short: the socket's path must fit a unix socket address (108 bytes).
    root = tempfile.mkdtemp(prefix="hdk-", dir="/tmp")
    cmd = [
        binary,
        f"--data-root={root}/data",
        f"--exec-root={root}/exec",
        f"--pidfile={root}/docker.pid",
        f"--host=unix://{root}/docker.sock",
        "--iptables=false",
        "--bridge=none",
        *shlex.split(os.environ.get("HOROLOGE_DOCKERD_ARGS", "")),
    ]
    with open(os.path.join(root, "dockerd.log"), "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = Dockerd(root, proc)
    deadline = time.monotonic() + timeout_s
    while not engine.answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            why = (
                f"exited with {proc.returncode}"
                if proc.poll() is not None
                else f"no answer in {timeout_s:g} s"
            )
            tail = engine.log_tail()
            engine.stop()
            raise RuntimeError(f"dockerd did not start ({why}): {' '.join(cmd)}\n{tail}")
        time.sleep(0.2)
    return engine


def _unmount_below(root: str) -> None:
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in sorted((p for p in points if p.startswith(root + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
