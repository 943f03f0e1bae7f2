"""A real text corpus that a Debian package ships: the Python documentation's sources, as word-level tokens.

Debian's `python3.11-doc` (`apt-get install python3.11-doc`; about 70 MB
installed) ships the reStructuredText sources of the Python 3.11
documentation as `/usr/share/doc/python3.11/html/_sources/**/*.rst.txt`
(497 files, 11 MB, in 3.11.2-6+deb12u*).  Licence: the Python Software
Foundation License Version 2, which covers Python "and its associated
documentation" (`/usr/share/doc/python3.11-doc/copyright`; the
documentation's own `license.rst.txt` adds that its code examples are also
under the Zero-Clause BSD licence).  Nothing is downloaded at run time.

What `load` makes of it, deterministically (no hash seeds, no locale):

- files in sorted order of their path under the root; every `heldout_every`-th
  file (index `heldout_every - 1`, `2 heldout_every - 1`, ... in that order)
  is held out, the rest train;
- each file lowercased and split into tokens (`tokenize`): runs of word
  characters (letters, digits, underscore; Unicode's `\\w`), and runs of one
  repeated punctuation character (`.`, `::`, `>>>`, `====`), so the markup
  stays in as punctuation; whitespace is dropped;
- a `<doc>` token before every file; the streams are the files' tokens back
  to back (train, held out);
- the vocabulary: the `vocab_size` most frequent tokens of the training
  files, `<doc>` and `<unk>` among them and counted like words (`<unk>`
  counts every token outside the vocabulary), ordered by count, then
  alphabetically: id 0 is the most frequent.  Held-out words the training
  files lack are `<unk>`.  Frequency order is what a log-uniform candidate
  sampler assumes (`hina.host.workloads.loguniform_ranks`).

    from hina.host import corpus
    c = corpus.load(vocab_size=32_000)       # corpus.missing() says why not, where the package is absent
    c.train, c.heldout                       # int32 token ids
    x = c.batch(c.train, rng, rows=32, length=36)   # 32 random windows of 36 tokens
"""

from __future__ import annotations

import collections
import functools
import hashlib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PACKAGE = "python3.11-doc"
SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
LICENSE = ("Python Software Foundation License Version 2 (the Python documentation; its code examples also "
           "under the Zero-Clause BSD licence): /usr/share/doc/python3.11-doc/copyright")
DOC, UNK = "<doc>", "<unk>"
_TOKEN = re.compile(r"\w+|([^\w\s])\1*")


def tokenize(text: str) -> list[str]:
    """Lowercased word runs and runs of one repeated punctuation character; whitespace dropped."""
    return [m.group(0) for m in _TOKEN.finditer(text.lower())]


def files(root: Path = SOURCES) -> list[Path]:
    """The corpus's files, in sorted order of their path under root (as POSIX strings)."""
    return sorted(Path(root).rglob("*.txt"), key=lambda p: p.relative_to(root).as_posix())


def missing(root: Path = SOURCES) -> str | None:
    """Why the corpus cannot be read here, or None."""
    if not Path(root).is_dir() or not files(root):
        return f"no {root}: install Debian's {PACKAGE} (apt-get install {PACKAGE})"
    return None


def package_version() -> str | None:
    """The installed python3.11-doc's Debian version, or None (not Debian, not installed)."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


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
        """The facts a result records: source, package version, licence, files, tokens, vocabulary, coverage."""
        return {"source": self.root, "package": PACKAGE, "package_version": package_version(), "license": LICENSE,
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
def load(root: Path = SOURCES, vocab_size: int = 32_000, heldout_every: int = 10) -> Corpus:
    """Read, tokenize, split and number the corpus (module docstring); cached per process."""
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be at least 3, got {vocab_size}")
    if heldout_every < 2:
        raise ValueError(f"heldout_every must be at least 2, got {heldout_every}")
    why = missing(root)
    if why:
        raise FileNotFoundError(why)
    paths = files(root)
    train_tokens: list[str] = []
    heldout_tokens: list[str] = []
    train_files = heldout_files = 0
    for i, path in enumerate(paths):
        toks = [DOC, *tokenize(path.read_text(encoding="utf-8", errors="replace"))]
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
                  counts=np.bincount(train, minlength=len(vocab)).astype(np.int64))
