"""A real OCI registry for tests: Debian's docker-registry (the CNCF distribution registry),
serving plain HTTP on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.procs import free_port

MISSING = (
    None
    if shutil.which("docker-registry")
    else "Debian's docker-registry is not installed (apt-get install -y docker-registry): the registry pushed to"
)


@contextmanager
def serve_registry(root: Path) -> Iterator[str]:
    """Serve a registry storing under `root` while the block runs; yields its host:port."""
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    server = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "docker-registry did not start"
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
