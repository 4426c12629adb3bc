"""Benchmarks from a clone (issue 21 #16): each says where its data comes from, and
``bench/data.py`` gets the public extraction sets — from their public sources online, from a
local copy otherwise.

Nothing here touches the internet: the local-copy paths run on small sets built in the test
(this script's layout, WCXB's upstream checkout, a repository archive), and the online path
runs against a loopback HTTPS proxy that refuses the tunnel, as a machine without a network
would: the script must name the URL it tried and fail with one clear line.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "data.py"
SH_COMMIT = "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010"
SH_URL = f"https://codeload.github.com/scrapinghub/article-extraction-benchmark/tar.gz/{SH_COMMIT}"


@pytest.fixture(scope="module")
def data() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchdata", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchdata"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def _page(html: str) -> bytes:
    return gzip.compress(html.encode(), mtime=0)


def _our_set(folder: Path, pages: dict[str, str]) -> dict[str, Any]:
    """A set in this script's layout (also scrapinghub's own): ground truth + gzipped pages."""
    (folder / "html").mkdir(parents=True)
    truth = {k: {"articleBody": f"Body of {k}.", "url": f"https://site.test/{k}"} for k in pages}
    (folder / "ground-truth.json").write_text(json.dumps(truth))
    for key, html in pages.items():
        (folder / "html" / f"{key}.html.gz").write_bytes(_page(html))
    return truth


def test_every_benchmark_says_where_its_data_comes_from() -> None:
    """Each benchmark's docstring has a ``Data:`` note or points at bench/data.py, and no
    benchmark reads a data folder of this machine by a path of its own."""
    silent, private = [], []
    for path in sorted((REPO / "bench").glob("*.py")):
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if path.name != "data.py" and "Data:" not in doc and "bench/data.py" not in doc:
            silent.append(path.name)
        if path.name != "data.py" and "shared/bench" in text:
            private.append(path.name)
    assert (silent, private) == ([], [])


def test_a_local_folder_of_sets_is_copied_as_it_is(
    data: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "copy"
    truth = _our_set(src / "scrapinghub-article-extraction-benchmark", {"a1": "<p>one</p>"})
    _our_set(src / "wcxb-dev", {"0001": "<p>w</p>", "0002": "<p>x</p>"})
    (src / "wcxb-dev" / "ground-truth-article.json").write_text("{}")
    into = tmp_path / "into"
    assert data.main(["--from", str(src), "--into", str(into)]) == 0
    sh = into / "scrapinghub-article-extraction-benchmark"
    assert capsys.readouterr().out.splitlines() == [
        f"scrapinghub: 1 pages in {sh} "
        "(https://github.com/scrapinghub/article-extraction-benchmark, MIT)",
        f"wcxb: 2 pages in {into / 'wcxb-dev'} "
        "(https://github.com/Murrough-Foley/web-content-extraction-benchmark, CC-BY-4.0)",
    ]
    assert json.loads((sh / "ground-truth.json").read_text()) == truth
    assert (sh / "html" / "a1.html.gz").read_bytes() == _page("<p>one</p>")
    assert json.loads((sh / "SOURCE.json").read_text()) == {
        "set": "scrapinghub",
        "repository": "https://github.com/scrapinghub/article-extraction-benchmark",
        "commit": SH_COMMIT,
        "license": "MIT",
        "from": str(src),
    }
    assert (into / "wcxb-dev" / "ground-truth-article.json").read_text() == "{}"
    assert sorted(p.name for p in into.iterdir()) == [sh.name, "wcxb-dev"]  # nothing partial
    # Benchmarks find the sets there.
    os.environ[data.ENV] = str(into)
    try:
        assert data.extraction_set("scrapinghub") == sh
        assert data.extraction_pages("wcxb") == [
            into / "wcxb-dev/html/0001.html.gz",
            into / "wcxb-dev/html/0002.html.gz",
        ]
    finally:
        del os.environ[data.ENV]
    # Again: already there, left alone.
    assert data.main(["--set", "scrapinghub", "--from", str(src), "--into", str(into)]) == 0
    assert capsys.readouterr().out == f"scrapinghub: already in {sh} (--force replaces it)\n"


def _wcxb_entry(key: str, main: str | None, kind: str = "article") -> dict[str, Any]:
    gt: dict[str, Any] = {"title": f"T{key}", "author": "A", "with": [f"w{key}"], "without": ["x"]}
    if main is not None:
        gt["main_content"] = main
        gt["main_content_markdown"] = f"# {main}"
    return {
        "schema_version": "2.0",
        "url": f"https://w.test/{key}",
        "file_id": key,
        "_internal": {"page_type": {"primary": kind, "confidence": "verified"}},
        "ground_truth": gt,
    }


def test_a_wcxb_checkout_is_gathered_into_this_layout(
    data: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """WCXB keeps one ground-truth file per page under dev/; pages without a main content,
    or without their HTML, are left out."""
    checkout = tmp_path / "web-content-extraction-benchmark"
    (checkout / "dev" / "ground-truth").mkdir(parents=True)
    (checkout / "dev" / "html").mkdir()
    (checkout / "LICENSE").write_text("CC-BY-4.0\n")
    entries = {
        "0001": _wcxb_entry("0001", "First body."),
        "0002": _wcxb_entry("0002", None),  # no main content
        "0003": _wcxb_entry("0003", "Third body.", kind="forum"),
        "0004": _wcxb_entry("0004", "No page."),  # its html is missing
    }
    for key, entry in entries.items():
        (checkout / "dev" / "ground-truth" / f"{key}.json").write_text(json.dumps(entry))
        if key != "0004":
            (checkout / "dev" / "html" / f"{key}.html.gz").write_bytes(_page(f"<p>{key}</p>"))
    into = tmp_path / "into"
    assert data.main(["--set", "wcxb", "--from", str(checkout), "--into", str(into)]) == 0
    out = into / "wcxb-dev"
    expected = {
        "0001": {
            "articleBody": "First body.",
            "page_type": "article",
            "title": "T0001",
            "url": "https://w.test/0001",
            "with": ["w0001"],
            "without": ["x"],
        },
        "0003": {
            "articleBody": "Third body.",
            "page_type": "forum",
            "title": "T0003",
            "url": "https://w.test/0003",
            "with": ["w0003"],
            "without": ["x"],
        },
    }
    assert json.loads((out / "ground-truth.json").read_text()) == expected
    assert json.loads((out / "ground-truth-forum.json").read_text()) == {"0003": expected["0003"]}
    assert sorted(p.name for p in (out / "html").iterdir()) == ["0001.html.gz", "0003.html.gz"]
    assert (out / "LICENSE").read_text() == "CC-BY-4.0\n"
    assert capsys.readouterr().out.startswith(f"wcxb: 2 pages in {out} ")


def test_a_downloaded_archive_is_unpacked(data: ModuleType, tmp_path: Path) -> None:
    """The repository's .tar.gz (as codeload serves it: one top folder) works with --from."""
    repo = tmp_path / "repo"
    _our_set(repo, {"b2": "<p>two</p>"})
    (repo / "evaluate.py").write_text("print('not needed')\n")
    archive = tmp_path / "article-extraction-benchmark.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(repo, arcname=f"article-extraction-benchmark-{SH_COMMIT}")
    into = tmp_path / "into"
    assert data.main(["--set", "scrapinghub", "--from", str(archive), "--into", str(into)]) == 0
    sh = into / "scrapinghub-article-extraction-benchmark"
    assert sorted(p.name for p in sh.iterdir()) == ["SOURCE.json", "ground-truth.json", "html"]
    assert (sh / "html" / "b2.html.gz").read_bytes() == _page("<p>two</p>")


@pytest.mark.parametrize("kind", ["parent", "symlink"])
def test_an_archive_reaching_outside_is_refused_and_writes_nothing(
    data: ModuleType, tmp_path: Path, kind: str
) -> None:
    """A member named ``../x`` or a link is refused before anything is unpacked — on every
    Python 3.11 (extraction filters came in 3.11.4; Debian 12 has 3.11.2)."""
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        good = tarfile.TarInfo("top/ground-truth.json")
        good.size = 2
        tar.addfile(good, io.BytesIO(b"{}"))
        evil = tarfile.TarInfo("top/../../escaped" if kind == "parent" else "top/link")
        if kind == "symlink":
            evil.type, evil.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(evil, io.BytesIO(b""))
    into = tmp_path / "into"
    into.mkdir()
    name = "top/../../escaped" if kind == "parent" else "top/link"
    with pytest.raises(data.DataError, match=f"refused '{name}': not a plain file or folder"):
        data.unpack(archive, into)
    assert list(into.iterdir()) == [] and not (tmp_path / "escaped").exists()


def test_a_set_missing_a_page_is_refused_and_nothing_is_left(
    data: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "scrapinghub-article-extraction-benchmark"
    _our_set(src, {"c3": "<p>three</p>"})
    (src / "html" / "c3.html.gz").write_bytes(b"not gzip")
    into = tmp_path / "into"
    assert data.main(["--set", "scrapinghub", "--from", str(src), "--into", str(into)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bench/data.py: scrapinghub: {src / 'html' / 'c3.html.gz'}: ")
    assert "not gzip" in err and err.count("\n") == 1
    assert list(into.iterdir()) == []


def test_a_benchmark_without_its_set_says_how_to_get_it(
    data: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "DEFAULT_INTO", tmp_path / "none")
    monkeypatch.setattr(data, "SHARED", tmp_path / "shared")
    monkeypatch.delenv(data.ENV, raising=False)
    with pytest.raises(SystemExit) as exc:
        data.extraction_set("wcxb")
    assert str(exc.value) == (
        "the wcxb benchmark set (https://github.com/Murrough-Foley/web-content-extraction-"
        f"benchmark) is not here (looked in {tmp_path / 'none'}, {tmp_path / 'shared'}); get "
        "it with: .venv/bin/python bench/data.py --set wcxb (online), or add --from DIR for a "
        "local copy"
    )


@pytest.fixture
def refusing_proxy() -> Iterator[tuple[int, list[bytes]]]:
    """An HTTPS proxy on loopback that answers every CONNECT with 502: the network is out of
    reach. Records each request's first line."""
    seen: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                seen.append(head.split(b"\r\n", 1)[0])
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        server.close()
        thread.join(5)


def test_offline_it_names_the_url_and_fails_in_one_line(
    tmp_path: Path, refusing_proxy: tuple[int, list[bytes]]
) -> None:
    port, seen = refusing_proxy
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "https_proxy": f"http://127.0.0.1:{port}",
    }
    into = tmp_path / "into"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--set", "scrapinghub", "--into", str(into)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"fetching {SH_URL}",
        f"bench/data.py: scrapinghub: could not download {SH_URL}: Tunnel connection failed: "
        "502 Bad Gateway; offline? take the set from a local copy with --from PATH (a folder "
        "of sets, a checkout, or this .tar.gz)",
    ]
    # The one connection it made went to the (loopback) proxy, for the pinned archive's host.
    assert seen == [b"CONNECT codeload.github.com:443 HTTP/1.0"]
    assert list(into.iterdir()) == []


def test_the_docs_say_how_to_get_the_data() -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    assert "bench/data.py" in text and "--from" in text and "make bench-data" in text
    assert (
        "../shared/bench/extraction/scrapinghub" not in text
    )  # no machine-local path as the source
