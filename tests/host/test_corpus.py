"""hina.host.corpus: deterministic tokens, split and vocabulary; on a folder made here, and on NumPy 2.1.3's
documentation (the pinned archive, where `make corpus` fetched it)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hina.host import corpus

MISSING = corpus.missing()
DDP = Path(__file__).resolve().parents[2] / "docs" / "ddp.md"


def documented_digest() -> str:
    """The source digest docs/ddp.md quotes for the corpus its figures were measured on."""
    found = re.search(r"source digest\s+`([0-9a-f]{64})`", DDP.read_text())
    assert found, "docs/ddp.md names no source digest"
    return found.group(1)


def same_corpus_as_the_docs(c: corpus.Corpus) -> None:
    """Checked before any count: the figures in docs/ddp.md are the documented corpus's."""
    if c.source_digest != documented_digest():
        pytest.skip(f"the corpus at {c.root} ({c.train_files + c.heldout_files} documents, source digest "
                    f"{c.source_digest[:16]}...) is not the one docs/ddp.md was measured on (source digest "
                    f"{documented_digest()[:16]}..., NumPy 2.1.3's archive: make corpus)")


def test_tokens_are_lowercased_words_and_runs_of_one_punctuation_character():
    text = "Hello, World!!  >>> x_1 == 2.5 ``code`` Café ... -->"
    assert corpus.tokenize(text) == ["hello", ",", "world", "!!", ">>>", "x_1", "==", "2", ".", "5", "``", "code",
                                     "``", "café", "...", "--", ">"]


def _folder(root: Path, texts: list[str]) -> Path:
    for i, text in enumerate(texts):  # file names sorted as the corpus sorts them: f00, f01, ... in subfolders
        path = root / ("sub" if i % 3 else "") / f"f{i:02d}.rst.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_split_holds_out_every_nth_file_and_the_vocabulary_is_ranked_by_training_counts(tmp_path):
    texts = [f"the cat {i} sat on the mat ." if i % 4 else "the dog barked" for i in range(12)]
    root = _folder(tmp_path, texts)
    order = corpus.files(root)
    assert order == sorted(order)
    c = corpus.load(root, vocab_size=8, heldout_every=4)
    # files 3, 7, 11 in path order are held out
    held = [order[i] for i in (3, 7, 11)]
    assert c.heldout_files == 3 and c.train_files == 9
    held_tokens = sum(len(corpus.tokenize((root / h).read_text())) + 1 for h in held)
    assert c.source_digest == corpus.source_digest(corpus.documents(root))
    assert c.heldout.size == held_tokens and c.train.size + c.heldout.size == sum(
        len(corpus.tokenize(t)) + 1 for t in texts)
    # ranked by count (ties alphabetical), <doc> and <unk> counted like words; id 0 the most frequent
    assert c.vocab[0] == "the" and len(c.vocab) == 8 and corpus.UNK in c.vocab and corpus.DOC in c.vocab
    assert list(c.counts) == sorted(c.counts, reverse=True)
    assert c.counts.sum() == c.train.size
    assert c.counts[c.unk] == np.sum(c.train == c.unk) > 0  # the rare numbers fell out of 8 words
    # the same folder, the same numbers (a fresh load, not the cache)
    corpus.load.cache_clear()
    again = corpus.load(root, vocab_size=8, heldout_every=4)
    assert again.digest() == c.digest() and again.vocab == c.vocab


def test_batches_are_windows_of_the_stream_at_seeded_offsets():
    stream = np.arange(100, dtype=np.int32)
    a = corpus.Corpus.batch(stream, np.random.default_rng(3), rows=5, length=7)
    b = corpus.Corpus.batch(stream, np.random.default_rng(3), rows=5, length=7)
    assert a.shape == (5, 7) and a.dtype == np.int64 and np.array_equal(a, b)
    assert np.all(np.diff(a, axis=1) == 1) and a.max() < 100


def test_a_missing_archive_says_how_to_fetch_it(tmp_path):
    why = corpus.missing(tmp_path / "nowhere.tar.gz")
    assert "make corpus" in why and "sha256" in why
    with pytest.raises(FileNotFoundError, match="make corpus"):
        corpus.load(tmp_path / "nowhere.tar.gz")


def test_a_file_that_is_not_the_archive_is_refused_by_its_digest(tmp_path):
    fake = tmp_path / corpus.ARCHIVE
    fake.write_bytes(b"not numpy")
    assert "is not numpy-2.1.3.tar.gz as PyPI publishes it" in corpus.missing(fake)
    with pytest.raises(OSError, match=f"expected {corpus.SHA256}"):  # a download of other bytes: refused
        corpus.fetch(tmp_path / "dest" / corpus.ARCHIVE, log=lambda _m: None,
                     sources=corpus.Sources(indexes=(), find_links=(str(tmp_path),)))
    assert not list((tmp_path / "dest").iterdir())  # nothing left behind


def test_the_source_digest_covers_every_documents_path_and_bytes(tmp_path):
    root = _folder(tmp_path, ["a b", "c d"])
    before = corpus.source_digest(corpus.documents(root))
    (root / "f00.rst.txt").write_text("a  b")
    assert corpus.source_digest(corpus.documents(root)) != before
    (root / "f00.rst.txt").write_text("a b")
    assert corpus.source_digest(corpus.documents(root)) == before
    (root / "f00.rst.txt").rename(root / "g00.rst.txt")
    assert corpus.source_digest(corpus.documents(root)) != before


@pytest.mark.skipif(MISSING is not None, reason=f"the corpus: {MISSING}")
def test_the_numpy_documentation_corpus_is_what_the_docs_say():
    c = corpus.load(vocab_size=20_000)
    same_corpus_as_the_docs(c)
    facts = c.describe()
    assert facts["files"]["train"] + facts["files"]["heldout"] == len(corpus.files())
    assert facts["files"]["heldout"] == len(corpus.files()) // 10
    assert facts["tokens"]["train"] > 1_000_000 and facts["tokens"]["heldout"] > 90_000
    assert facts["vocab"] == 20_000 and facts["distinct_train_tokens"] > 20_000
    assert facts["unk_rate"]["train"] < 0.02 and "BSD 3-Clause" in facts["license"]
    corpus.load.cache_clear()
    assert corpus.load(vocab_size=20_000).digest() == facts["digest"]


@pytest.mark.skipif(MISSING is not None, reason=f"the corpus: {MISSING}")
def test_the_facts_docs_ddp_quotes_are_the_corpus_s():
    text = " ".join(DDP.read_text().split())
    c = corpus.load(vocab_size=20_000)
    same_corpus_as_the_docs(c)
    facts = c.describe()
    n_files = facts["files"]["train"] + facts["files"]["heldout"]
    quoted = [f"{n_files} documents", f"({facts['files']['train']} train, {facts['files']['heldout']} held out)",
              f"{facts['tokens']['train']:,} training and {facts['tokens']['heldout']:,} held-out tokens",
              f"{facts['distinct_train_tokens']:,} distinct training tokens",
              f"{facts['unk_rate']['train']:.1%} of training tokens, {facts['unk_rate']['heldout']:.1%} of held-out"]
    missing = [q for q in quoted if q not in text]
    assert not missing, missing
