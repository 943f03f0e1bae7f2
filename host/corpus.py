"""A real text corpus whose bytes are fixed by an exact version: NumPy 2.1.3's documentation sources.

NumPy's source distribution on PyPI, `numpy-2.1.3.tar.gz` (20 MB; its
sha256 is pinned below, so every machine reads the same bytes), holds the
reStructuredText sources of NumPy's documentation under
`numpy-2.1.3/doc/` (477 `.rst` files, 4.9 MB).  `make install` fetches the
archive once (`python -m hina.host.corpus fetch`, into
`~/.cache/hina/corpus/`, or where `$HINA_CORPUS` points) from where the
user's pip looks (`pip_sources`: its find-links, its index and extra
indexes, its proxy and certificates: a mirror, a proxy or an offline
wheelhouse serve it as they serve packages) and checks it; it is read in
place, never unpacked, and nothing is downloaded at run time.
Licence: NumPy's BSD 3-Clause licence, which covers its documentation
(`numpy-2.1.3/LICENSE.txt` in the archive).

What `load` makes of it, deterministically (no hash seeds, no locale):

- the documents (`.rst` under `doc/` in the archive; `.rst` and `.txt`
  files in a folder) in sorted order of their path; every
  `heldout_every`-th (index `heldout_every - 1`, `2 heldout_every - 1`,
  ... in that order) is held out, the rest train;
- each document lowercased and split into tokens (`tokenize`): runs of
  word characters (letters, digits, underscore; Unicode's `\\w`), and runs
  of one repeated punctuation character (`.`, `::`, `>>>`, `====`), so the
  markup stays in as punctuation; whitespace is dropped;
- a `<doc>` token before every document; the streams are the documents'
  tokens back to back (train, held out);
- the vocabulary: the `vocab_size` most frequent tokens of the training
  documents, `<doc>` and `<unk>` among them and counted like words
  (`<unk>` counts every token outside the vocabulary), ordered by count,
  then alphabetically: id 0 is the most frequent.  Held-out words the
  training documents lack are `<unk>`.  Frequency order is what a
  log-uniform candidate sampler assumes (`hina.host.workloads.loguniform_ranks`).

The corpus is identified by its content: `source_digest` is a sha256 over
every document's path and bytes, which docs/ddp.md quotes beside its
figures; `Corpus.digest` covers the numbers made of them.

    from hina.host import corpus
    c = corpus.load(vocab_size=20_000)       # corpus.missing() says why not, where the archive is absent
    c.train, c.heldout                       # int32 token ids
    x = c.batch(c.train, rng, rows=32, length=36)   # 32 random windows of 36 tokens
"""

from __future__ import annotations

import ast
import base64
import collections
import functools
import hashlib
import os
import re
import ssl
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# The archive, by exact version and digest (PyPI's own sha256 of the file).
PROJECT = "numpy"
ARCHIVE = "numpy-2.1.3.tar.gz"
SHA256 = "aa08e04e08aaf974d4458def539dece0d28146d866a39da5639596f4921fd761"
PYPI = "https://pypi.org/simple"  # pip's index where its configuration names none
SIZE = 20_166_090
MEMBERS = "numpy-2.1.3/doc/"  # the documents: the .rst files under this folder of the archive
LICENSE = "NumPy's BSD 3-Clause licence, which covers its documentation: numpy-2.1.3/LICENSE.txt in the archive"
DOC, UNK = "<doc>", "<unk>"
_TOKEN = re.compile(r"\w+|([^\w\s])\1*")


def default_source() -> Path:
    """Where the corpus is read from: $HINA_CORPUS (the archive, or a folder of documents), else the
    archive in ~/.cache/hina/corpus (or $XDG_CACHE_HOME/hina/corpus)."""
    configured = os.environ.get("HINA_CORPUS")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hina" / "corpus" / ARCHIVE


SOURCE = default_source()


def tokenize(text: str) -> list[str]:
    """Lowercased word runs and runs of one repeated punctuation character; whitespace dropped."""
    return [m.group(0) for m in _TOKEN.finditer(text.lower())]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _archive_ok(path: Path, size: int, mtime: float) -> bool:
    return size == SIZE and _sha256(path) == SHA256


def documents(source: Path = SOURCE) -> list[tuple[str, bytes]]:
    """The corpus's documents as (path, bytes), in sorted order of the path: the archive's .rst files under
    its doc/ folder, or a folder's .rst and .txt files (paths relative to it, as POSIX strings)."""
    source = Path(source)
    if source.is_dir():
        found = [p for p in source.rglob("*") if p.is_file() and p.suffix in (".rst", ".txt")]
        return sorted((p.relative_to(source).as_posix(), p.read_bytes()) for p in found)
    with tarfile.open(source) as archive:
        members = sorted((m for m in archive.getmembers()
                          if m.isfile() and m.name.startswith(MEMBERS) and m.name.endswith(".rst")),
                         key=lambda m: m.name)
        return [(m.name, archive.extractfile(m).read()) for m in members]


def files(source: Path = SOURCE) -> list[str]:
    """The documents' paths, in the order they are read."""
    return [name for name, _ in documents(source)]


def source_digest(docs: list[tuple[str, bytes]]) -> str:
    """sha256 over every document's path and bytes, in order: the corpus, identified by its content."""
    h = hashlib.sha256()
    for name, data in docs:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def missing(source: Path = SOURCE) -> str | None:
    """Why the corpus cannot be read here, or None."""
    source = Path(source)
    if source.is_dir():
        return None if documents(source) else f"no .rst or .txt documents under {source}"
    if not source.is_file():
        return (f"no corpus at {source}: run `make corpus` (python -m hina.host.corpus fetch: NumPy 2.1.3's "
                f"documentation sources, {SIZE / 1e6:.0f} MB from pip's index, checked against their sha256)")
    st = source.stat()
    if not _archive_ok(source, st.st_size, st.st_mtime):
        return (f"{source} is not {ARCHIVE} as PyPI publishes it (sha256 {SHA256[:16]}...): remove it and run "
                f"`make corpus` again")
    return None


@dataclass(frozen=True)
class Sources:
    """Where pip looks for a distribution file: find-links (folders, or pages of links) first, then its index and
    extra indexes (PEP 503 simple pages), through its proxy, trusting its certificates."""

    indexes: tuple[str, ...] = (PYPI,)
    find_links: tuple[str, ...] = ()
    proxy: str | None = None
    cert: str | None = None
    timeout: float = 60.0


def pip_sources(python: str = sys.executable) -> Sources:
    """The sources `pip download` would use here: pip's configuration as `pip config list` gives it (its files,
    and $PIP_* variables over them), the download command's section over the global one."""
    try:
        out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):  # no pip: what an unconfigured pip would do
        return Sources()
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        try:
            found.setdefault(name, {})[section] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            continue

    def option(name: str) -> str | None:
        for section in (":env:", "download", "global"):  # pip's own order: variables, the command, all commands
            if section in found.get(name, {}):
                return found[name][section]
        return None

    no_index = (option("no-index") or "").lower() in ("1", "true", "yes", "on")
    indexes = () if no_index else (option("index-url") or PYPI, *(option("extra-index-url") or "").split())
    timeout = option("timeout") or option("default-timeout")
    return Sources(indexes=tuple(indexes), find_links=tuple((option("find-links") or "").split()),
                   proxy=option("proxy"), cert=option("cert"), timeout=float(timeout) if timeout else 60.0)


def _opener(sources: Sources) -> urllib.request.OpenerDirector:
    handlers: list = [urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=sources.cert))]
    if sources.proxy:
        proxy = sources.proxy if "://" in sources.proxy else f"http://{sources.proxy}"
        handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
    return urllib.request.build_opener(*handlers)


def _open(opener: urllib.request.OpenerDirector, url: str, timeout: float):
    """A URL's response; user:password in it (a private index's) goes as basic authentication."""
    parts = urllib.parse.urlsplit(url)
    request = urllib.request.Request(url)
    if parts.username:
        request = urllib.request.Request(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port
                                                                                 else "")).geturl())
        login = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        request.add_header("Authorization", "Basic " + base64.b64encode(login.encode()).decode())
    return opener.open(request, timeout=timeout)


def _page(opener, url: str, timeout: float) -> str:
    """A page of links: a URL's text, or a local folder's index.html (a file:// index)."""
    if url.startswith("file:"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        return (path / "index.html" if path.is_dir() else path).read_text(errors="replace")
    with _open(opener, url, timeout) as response:
        return response.read().decode(errors="replace")


def candidates(sources: Sources, opener=None) -> list[str]:
    """Where the archive is, as pip would find it: a find-links folder holding it, a find-links page or an index's
    project page linking to it; URLs, in that order (a source that cannot be read is passed over)."""
    opener = opener or _opener(sources)
    found = []
    for link in sources.find_links:
        folder = Path(urllib.request.url2pathname(urllib.parse.urlsplit(link).path)) if link.startswith("file:") \
            else None if "://" in link else Path(link)
        if folder is not None and folder.is_dir():  # a wheelhouse: its files
            found += [(folder / ARCHIVE).absolute().as_uri()] if (folder / ARCHIVE).is_file() else []
        else:
            found += _links(opener, link, sources.timeout)
    for index in sources.indexes:
        found += _links(opener, f"{index.rstrip('/')}/{PROJECT}/", sources.timeout)
    return list(dict.fromkeys(found))


def _links(opener, url: str, timeout: float) -> list[str]:
    """The links to the archive on a page of links (none where the page cannot be read)."""
    try:
        text = _page(opener, url, timeout)
    except (OSError, ValueError):
        return []
    links = (urllib.parse.urljoin(url, href) for href in re.findall(r"""<a\s[^>]*?href=["']([^"']+)["']""", text,
                                                                     re.I))
    return [link.split("#", 1)[0] for link in links
            if urllib.parse.unquote(urllib.parse.urlsplit(link).path).rsplit("/", 1)[-1] == ARCHIVE]


def fetch(dest: Path | None = None, log=print, sources: Sources | None = None) -> Path:
    """Fetch the archive to `dest` (default: `default_source()`) unless it is there, from where pip looks
    (`sources`, default `pip_sources()`), and check its sha256.  Raises OSError (naming where it looked, or
    what differs) when no source gives the archive."""
    dest = Path(dest or default_source())
    if dest.is_file() and missing(dest) is None:
        log(f"corpus: {dest} is {ARCHIVE} (sha256 checked)")
        return dest
    sources = sources or pip_sources()
    opener = _opener(sources)
    found = candidates(sources, opener)
    if not found:
        raise OSError(f"no {ARCHIVE} at pip's sources: find-links {', '.join(sources.find_links) or 'none'}; indexes "
                      f"{', '.join(sources.indexes) or 'none (no-index)'}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    failures = []
    for url in found:
        log(f"corpus: fetching {url} ({SIZE / 1e6:.0f} MB) ...")
        try:
            return _fetch_one(opener, url, dest, sources.timeout, log)
        except OSError as exc:
            failures.append(str(exc))
    raise OSError("; ".join(failures))


def _fetch_one(opener, url: str, dest: Path, timeout: float, log) -> Path:
    part = dest.with_name(dest.name + ".part")
    try:
        with _open(opener, url, timeout) as response, open(part, "wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
        got = _sha256(part)
        if got != SHA256:
            raise OSError(f"{url}: sha256 {got}, expected {SHA256}")
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(dest)
    log(f"corpus: {dest} (sha256 checked)")
    return dest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["fetch"]:
        print(f"usage: python -m hina.host.corpus fetch  (fetches {ARCHIVE} from where pip looks into "
              f"{default_source()}); got {' '.join(args) or 'nothing'}", file=sys.stderr)
        return 2
    try:
        fetch()
    except OSError as exc:
        print(f"python -m hina.host.corpus fetch: {exc}", file=sys.stderr)
        return 1
    return 0


@dataclass(frozen=True)
class Corpus:
    """Token ids of the training and held-out streams, the vocabulary (id order) and what it was made of."""

    vocab: tuple[str, ...]
    train: np.ndarray  # int32 ids
    heldout: np.ndarray
    train_files: int
    heldout_files: int
    distinct: int  # distinct tokens in the training files (before the vocabulary's cut)
    root: str
    counts: np.ndarray = field(repr=False)  # per id: occurrences in the training stream
    source_digest: str = ""  # sha256 over the documents read (`source_digest`)

    @property
    def unk(self) -> int:
        return self.vocab.index(UNK)

    def digest(self) -> str:
        """sha256 over the vocabulary and both streams: the same data, the same digest, on any machine."""
        h = hashlib.sha256("\n".join(self.vocab).encode())
        h.update(self.train.tobytes())
        h.update(self.heldout.tobytes())
        return h.hexdigest()

    def describe(self) -> dict:
        """The facts a result records: source and its digest, licence, files, tokens, vocabulary, coverage."""
        return {"source": self.root, "archive": ARCHIVE, "source_digest": self.source_digest, "license": LICENSE,
                "files": {"train": self.train_files, "heldout": self.heldout_files},
                "tokens": {"train": int(self.train.size), "heldout": int(self.heldout.size)},
                "vocab": len(self.vocab), "distinct_train_tokens": self.distinct,
                "unk_rate": {"train": float(np.mean(self.train == self.unk)),
                             "heldout": float(np.mean(self.heldout == self.unk))},
                "digest": self.digest()}

    @staticmethod
    def batch(stream: np.ndarray, rng: np.random.Generator, rows: int, length: int) -> np.ndarray:
        """`rows` windows of `length` consecutive tokens at uniformly drawn offsets: (rows, length) int64."""
        starts = rng.integers(0, stream.size - length + 1, size=rows)
        return stream[starts[:, None] + np.arange(length)].astype(np.int64)


@functools.lru_cache(maxsize=4)
def load(root: Path = SOURCE, vocab_size: int = 32_000, heldout_every: int = 10) -> Corpus:
    """Read, tokenize, split and number the corpus (module docstring); cached per process."""
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be at least 3, got {vocab_size}")
    if heldout_every < 2:
        raise ValueError(f"heldout_every must be at least 2, got {heldout_every}")
    why = missing(root)
    if why:
        raise FileNotFoundError(why)
    docs = documents(root)
    train_tokens: list[str] = []
    heldout_tokens: list[str] = []
    train_files = heldout_files = 0
    for i, (_, data) in enumerate(docs):
        toks = [DOC, *tokenize(data.decode("utf-8", errors="replace"))]
        if i % heldout_every == heldout_every - 1:
            heldout_tokens += toks
            heldout_files += 1
        else:
            train_tokens += toks
            train_files += 1
    counts = collections.Counter(train_tokens)
    distinct = len(counts)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = ranked[: vocab_size - 1] if UNK not in counts else ranked[:vocab_size]
    kept_words = {w for w, _ in kept}
    unk_count = sum(c for w, c in ranked if w not in kept_words)
    final = sorted([*[(w, c) for w, c in kept if w != UNK], (UNK, unk_count)], key=lambda kv: (-kv[1], kv[0]))
    vocab = tuple(w for w, _ in final)
    if DOC not in vocab:
        raise ValueError(f"vocab_size {vocab_size} leaves out {DOC}: choose a larger one")
    ids = {w: i for i, w in enumerate(vocab)}
    unk = ids[UNK]

    def number(tokens: list[str]) -> np.ndarray:
        return np.fromiter((ids.get(t, unk) for t in tokens), dtype=np.int32, count=len(tokens))

    train = number(train_tokens)
    return Corpus(vocab=vocab, train=train, heldout=number(heldout_tokens), train_files=train_files,
                  heldout_files=heldout_files, distinct=distinct, root=str(root),
                  counts=np.bincount(train, minlength=len(vocab)).astype(np.int64), source_digest=source_digest(docs))


if __name__ == "__main__":
    sys.exit(main())
