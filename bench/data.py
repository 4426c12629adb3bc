"""The benchmarks' public data sets: where each comes from, how a clone gets it, and where the
benchmarks find it.

    .venv/bin/python bench/data.py [--set scrapinghub|wcxb|all] [--from PATH] [--into DIR]
                                   [--force]
    make bench-data [ARGS="--from PATH"]

Two public sets of web pages with their main text marked, for the extraction benchmark
(bench/extract.py) and the benchmarks that render real pages (bench/batch.py,
bench/dcache.py, bench/renderpool.py). Each is one folder holding ``ground-truth.json``
(``{"<id>": {"articleBody": …, "url": …, …}}``) and ``html/<id>.html.gz``:

- ``scrapinghub-article-extraction-benchmark/``: the 181 article pages (2019) of
  https://github.com/scrapinghub/article-extraction-benchmark at commit 4a3bc97 (MIT): its
  ``ground-truth.json`` and ``html/*.html.gz`` as they are;
- ``wcxb-dev/``: the dev split of the Web Content eXtraction Benchmark (2025, seven page
  types), https://github.com/Murrough-Foley/web-content-extraction-benchmark at commit
  c039d5e (CC-BY-4.0): ``dev/html/<id>.html.gz`` as they are, and ``dev/ground-truth/<id>.json``
  gathered into ``ground-truth.json`` (``articleBody`` = ``ground_truth.main_content``;
  ``title``, ``with``, ``without`` from ``ground_truth``; ``url``; ``page_type`` =
  ``_internal.page_type.primary``) plus one ``ground-truth-<type>.json`` per page type;
  pages without a main content are left out (1,476 remain).

Online, the script downloads each repository's archive at its pinned commit
(``https://codeload.github.com/OWNER/REPO/tar.gz/COMMIT``; it honours ``https_proxy``) and
unpacks the set from it. Offline, ``--from PATH`` takes the sets from PATH instead: a folder
holding the set folders above (a copy made by this script, e.g. ../shared/bench/extraction),
a set folder itself, an upstream repository's checkout, or its downloaded ``.tar.gz``.
Either way each set is checked (every ground-truth entry has its page) and lands in
``--into`` (default ``bench/.data/``, gitignored: the sets are never committed), with a
``SOURCE.json`` saying where it came from.

Benchmarks find a set with ``extraction_set(name)``: ``$SIFT_BENCH_DATA/<folder>``, else
``bench/.data/<folder>``, else ``../shared/bench/extraction/<folder>`` (a shared copy beside
the checkout); when none holds it they stop with one line saying how to get it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

BENCH = Path(__file__).resolve().parent
DEFAULT_INTO = BENCH / ".data"
SHARED = BENCH.parent.parent / "shared/bench/extraction"
ENV = "SIFT_BENCH_DATA"
DOWNLOAD_TIMEOUT_S = 60.0
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Source:
    """One public set: its folder name and the repository commit it comes from."""

    name: str
    folder: str
    repo: str
    commit: str
    license: str

    @property
    def archive_url(self) -> str:
        return f"https://codeload.github.com/{self.repo}/tar.gz/{self.commit}"

    @property
    def home(self) -> str:
        return f"https://github.com/{self.repo}"


SETS = {
    "scrapinghub": Source(
        "scrapinghub",
        "scrapinghub-article-extraction-benchmark",
        "scrapinghub/article-extraction-benchmark",
        "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010",
        "MIT",
    ),
    "wcxb": Source(
        "wcxb",
        "wcxb-dev",
        "Murrough-Foley/web-content-extraction-benchmark",
        "c039d5ee9f5a3a984a0e167e63aacd04e76e78a9",
        "CC-BY-4.0",
    ),
}


class DataError(Exception):
    """A set that cannot be fetched, found or read; its message is one line for people."""


# ---- where the benchmarks find a set --------------------------------------------------------


def search_path() -> list[Path]:
    """The folders searched for the sets, in order."""
    env = os.environ.get(ENV)
    return [*([Path(env)] if env else []), DEFAULT_INTO, SHARED]


def _complete(folder: Path) -> bool:
    return (folder / "ground-truth.json").is_file() and (folder / "html").is_dir()


def extraction_set(name: str) -> Path:
    """The folder of set ``name`` (``scrapinghub`` or ``wcxb``). Exits with one line naming
    the command that gets it when no searched folder holds it."""
    source = SETS[name]
    for root in search_path():
        if _complete(root / source.folder):
            return root / source.folder
    looked = ", ".join(str(p) for p in search_path())
    raise SystemExit(
        f"the {name} benchmark set ({source.home}) is not here (looked in {looked}); "
        f"get it with: .venv/bin/python bench/data.py --set {name} "
        "(online), or add --from DIR for a local copy"
    )


def extraction_pages(name: str) -> list[Path]:
    """Set ``name``'s page files (``html/*.html.gz``), sorted."""
    return sorted((extraction_set(name) / "html").glob("*.html.gz"))


# ---- getting a set --------------------------------------------------------------------------


def download(url: str, to: Path, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Save ``url`` to ``to``; a network failure is a ``DataError`` naming the URL."""
    print(f"fetching {url}", file=sys.stderr)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer, to.open("wb") as out:
            shutil.copyfileobj(answer, out, CHUNK_BYTES)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"could not download {url}: {reason}; offline? take the set from a local copy "
            "with --from PATH (a folder of sets, a checkout, or this .tar.gz)"
        ) from exc


def unpack(archive: Path, into: Path) -> Path:
    """Unpack a ``.tar.gz`` (regular files and folders only) and return its top folder.

    Members are checked here rather than by ``extractall(filter="data")`` alone: Pythons
    before 3.11.4 (Debian 12's 3.11.2) have no extraction filters.
    """
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(archive, member)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, members=members, filter="data")
            else:
                tar.extractall(into, members=members)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"{archive}: not a readable .tar.gz: {exc}") from exc
    tops = [p for p in into.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else into


def _check_member(archive: Path, member: tarfile.TarInfo) -> None:
    """Only regular files and folders, each inside the folder it is unpacked into."""
    parts = PurePosixPath(member.name).parts
    if not (member.isfile() or member.isdir()) or member.name.startswith("/") or ".." in parts:
        raise DataError(f"{archive}: refused {member.name!r}: not a plain file or folder inside")


def _wcxb_entries(dev: Path) -> dict[str, dict[str, object]]:
    """WCXB's per-page ground truth (``dev/ground-truth/<id>.json``) in this layout."""
    truth: dict[str, dict[str, object]] = {}
    for path in sorted((dev / "ground-truth").glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        gt = raw.get("ground_truth") or {}
        if not gt.get("main_content") or not (dev / "html" / f"{path.stem}.html.gz").is_file():
            continue
        kind = ((raw.get("_internal") or {}).get("page_type") or {}).get("primary") or "article"
        truth[path.stem] = {
            "articleBody": gt["main_content"],
            "page_type": kind,
            "title": gt.get("title") or "",
            "url": raw.get("url") or "",
            "with": list(gt.get("with") or []),
            "without": list(gt.get("without") or []),
        }
    return truth


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True), "utf-8")


def _layout_of(source: Source, root: Path) -> tuple[str, Path]:
    """Where in ``root`` the set is, and in which layout: ``sift`` (this script's; also
    scrapinghub's own) or ``wcxb`` (the upstream dev split)."""
    for folder in (root / source.folder, root):
        if _complete(folder):
            return "sift", folder
    if source.name == "wcxb" and (root / "dev" / "ground-truth").is_dir():
        return "wcxb", root / "dev"
    raise DataError(
        f"{root}: holds no {source.name} set (neither {source.folder}/ with ground-truth.json "
        f"and html/, nor a checkout of {source.home})"
    )


def build(source: Source, root: Path, dest: Path, origin: str) -> int:
    """Make ``dest`` the set found in ``root``; returns its number of pages."""
    layout, found = _layout_of(source, root)
    work = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    (work / "html").mkdir(parents=True)
    if layout == "wcxb":
        truth = _wcxb_entries(found)
        _write_json(work / "ground-truth.json", truth)
        for kind in sorted({str(e["page_type"]) for e in truth.values()}):
            typed = {k: e for k, e in truth.items() if e["page_type"] == kind}
            _write_json(work / f"ground-truth-{kind}.json", typed)
    else:
        shutil.copy2(found / "ground-truth.json", work / "ground-truth.json")
        for extra in found.glob("ground-truth-*.json"):
            shutil.copy2(extra, work / extra.name)
        truth = json.loads((found / "ground-truth.json").read_text(encoding="utf-8"))
    for name in ("LICENSE", "README.md"):
        if (found / name).is_file():
            shutil.copy2(found / name, work / name)
        elif (root / name).is_file():
            shutil.copy2(root / name, work / name)
    for key in truth:
        page = found / "html" / f"{key}.html.gz"
        try:
            with gzip.open(page) as fh:  # a page that does not decompress is no page
                fh.read(1)
        except (OSError, EOFError) as exc:
            shutil.rmtree(work)
            raise DataError(f"{page}: missing or not gzip ({exc})") from exc
        shutil.copy2(page, work / "html" / page.name)
    meta = {"set": source.name, "repository": source.home, "commit": source.commit}
    _write_json(work / "SOURCE.json", {**meta, "license": source.license, "from": origin})
    shutil.rmtree(dest, ignore_errors=True)
    work.rename(dest)
    return len(truth)


def get(source: Source, origin: Path | None, into: Path) -> int:
    """Fetch (``origin`` None) or copy set ``source`` into ``into``; returns its pages."""
    dest = into / source.folder
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into, prefix=".fetch-") as tmp:
        if origin is None:
            archive = Path(tmp) / "archive.tar.gz"
            download(source.archive_url, archive)
            return build(source, unpack(archive, Path(tmp) / "x"), dest, source.archive_url)
        if origin.is_file():
            return build(source, unpack(origin, Path(tmp) / "x"), dest, str(origin))
        if not origin.is_dir():
            raise DataError(f"--from {origin}: no such file or folder")
        return build(source, origin, dest, str(origin))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Get the benchmarks' public extraction sets (see this file's docstring).",
    )
    parser.add_argument("--set", choices=[*SETS, "all"], default="all")
    parser.add_argument(
        "--from",
        dest="origin",
        type=Path,
        metavar="PATH",
        help="a local copy instead of the network: a folder of sets, a set folder, an "
        "upstream checkout or its .tar.gz",
    )
    parser.add_argument("--into", type=Path, default=DEFAULT_INTO, metavar="DIR")
    parser.add_argument("--force", action="store_true", help="replace a set already there")
    args = parser.parse_args(argv)
    for name in SETS if args.set == "all" else [args.set]:
        source = SETS[name]
        dest = args.into / source.folder
        if _complete(dest) and not args.force:
            print(f"{name}: already in {dest} (--force replaces it)")
            continue
        try:
            pages = get(source, args.origin, args.into)
        except DataError as exc:
            print(f"bench/data.py: {name}: {exc}", file=sys.stderr)
            return 1
        print(f"{name}: {pages} pages in {dest} ({source.home}, {source.license})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
