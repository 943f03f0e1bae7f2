"""Model-shaped gradient workloads: where real gradients' zeros come from, per worker, seeded.

A workload is a list of layers laid out back to back in one flat float32
gradient.  An `Embedding` table has `rows` x `dim` parameters; a training
step looks up `lookups` ids drawn from the table's popularity law, and every
looked-up row's gradient is non-zero as a whole row (the rest of the table
is exactly zero).  Popular ids are drawn by every worker, so the union of N
workers' rows grows sub-linearly with N.  A `Dense` layer is non-zero
everywhere.  Popularity laws: "zipf" (word frequencies, exponent about
1.0-1.1; drawn as numpy's Zipf and folded into the vocabulary) and
"loguniform" (ranked ids, P(k) = log((k + 2)/(k + 1)) / log(V + 1), the
candidate-sampler law).  Ranks are spread over the table by a fixed
multiplicative permutation, so popular rows are not adjacent.

    from host import workloads            # benchmarks/workloads.py re-exports it
    w = workloads.preset("lstm", scale=0.02)
    grads = w.gradients(workers=8, seed=0)        # list of float32 arrays, one per worker
    print(workloads.densities(grads))            # per-worker and union density

Presets (`PRESETS`) carry the layer shapes of the models the seed
literature evaluates, at full size (`scale=1`); `scale` shrinks every table,
every dense layer and every batch by the same factor, which keeps the
densities (about) where they were.  The densities each preset's docstring
quotes are estimates worked out from the models' settings (the OmniReduce
and Zen papers measured per-model densities, but their tables were not
available here); `python benchmarks/workloads.py` prints what the
generators actually produce.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

_SPREAD = 2654435761  # Knuth's multiplicative constant: rank -> row permutation for any table size


def loguniform_ranks(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """`size` ranks in [0, n) with P(k) = log((k + 2)/(k + 1)) / log(n + 1): the candidate-sampler law."""
    ranks = np.floor(np.exp(rng.random(size) * math.log(n + 1))).astype(np.int64) - 1
    return np.clip(ranks, 0, n - 1)


@dataclasses.dataclass(frozen=True)
class Embedding:
    name: str
    rows: int
    dim: int
    lookups: int  # ids drawn per worker and step (before de-duplication)
    popularity: str = "zipf"
    exponent: float = 1.05  # zipf only

    @property
    def size(self) -> int:
        return self.rows * self.dim

    def touched_rows(self, rng: np.random.Generator) -> np.ndarray:
        if self.popularity == "zipf":
            ranks = rng.zipf(self.exponent, size=self.lookups) - 1
            ranks = ranks % self.rows  # fold the (rare) tail beyond the vocabulary back in
        elif self.popularity == "loguniform":
            ranks = loguniform_ranks(rng, self.rows, self.lookups)
        else:
            raise ValueError(f"unknown popularity {self.popularity!r}: zipf or loguniform")
        spread = _SPREAD % self.rows or 1
        while math.gcd(spread, self.rows) != 1:
            spread += 1
        return np.unique((ranks.astype(np.int64) * spread) % self.rows)

    def scaled(self, factor: float) -> Embedding:
        return dataclasses.replace(self, rows=max(1, round(self.rows * factor)),
                                   lookups=max(1, round(self.lookups * factor)))


@dataclasses.dataclass(frozen=True)
class Dense:
    name: str
    size: int

    def scaled(self, factor: float) -> Dense:
        return dataclasses.replace(self, size=max(1, round(self.size * factor)))


Layer = Embedding | Dense


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    layers: tuple[Layer, ...]
    note: str = ""

    @property
    def size(self) -> int:
        return sum(layer.size for layer in self.layers)

    def scaled(self, factor: float) -> Workload:
        if not 0 < factor <= 1:
            raise ValueError(f"scale must be in (0, 1], got {factor}")
        return dataclasses.replace(self, layers=tuple(layer.scaled(factor) for layer in self.layers))

    def gradient(self, seed: int, rank: int) -> np.ndarray:
        """Worker `rank`'s float32 gradient for step `seed`: reproducible from (seed, rank)."""
        rng = np.random.default_rng([seed, rank, 0x5EED])
        grad = np.zeros(self.size, dtype=np.float32)
        at = 0
        for layer in self.layers:
            if isinstance(layer, Dense):
                grad[at : at + layer.size] = rng.standard_normal(layer.size, dtype=np.float32)
            else:
                rows = layer.touched_rows(rng)
                block = grad[at : at + layer.size].reshape(layer.rows, layer.dim)
                block[rows] = rng.standard_normal((rows.size, layer.dim), dtype=np.float32)
            at += layer.size
        return grad

    def gradients(self, workers: int, seed: int = 0) -> list[np.ndarray]:
        return [self.gradient(seed, rank) for rank in range(workers)]

    def describe(self) -> str:
        parts = [f"{layer.name} {layer.rows:,}x{layer.dim} ({layer.lookups:,} {layer.popularity} lookups)"
                 if isinstance(layer, Embedding) else f"{layer.name} {layer.size:,} dense" for layer in self.layers]
        return f"{self.name}: {self.size:,} parameters: " + "; ".join(parts)


def densities(grads: list[np.ndarray]) -> dict[str, float]:
    """Mean per-worker density and the density of the union of all workers' non-zeros."""
    union = np.zeros(grads[0].size, dtype=np.bool_)
    per = []
    for g in grads:
        nz = g != 0
        per.append(float(nz.mean()))
        union |= nz
    return {"per_worker": float(np.mean(per)), "union": float(union.mean())}


# -- presets -------------------------------------------------------------------------------
def ncf() -> Workload:
    """NCF (NeuMF) on MovieLens-20M enlarged x4x16, as OmniReduce trains it.

    498,975 users and 427,888 items (ML-20m x4x16); GMF embeddings of 64 and
    MLP embeddings of 128 per user and item, MLP 256-256-128-64: about 178M
    parameters, >99.9% of them in embeddings.  A local batch of 1,048,576
    (user, item) pairs touches most users and items each step: estimated
    55-65% per-worker density and 95-100% for the union of 8 (est., from
    the batch and table sizes; ids drawn log-uniformly by rank).  Dense per
    step, so hina falls back to a dense ADD after the index phase.
    Sources: OmniReduce (Fei et al., SIGCOMM 2021) training settings; the
    MovieLens-20M statistics (138,493 users, 27,278 movies).
    """
    batch = 1_048_576
    return Workload("ncf", (
        Embedding("user_gmf", 498_975, 64, batch, "loguniform"),
        Embedding("item_gmf", 427_888, 64, batch, "loguniform"),
        Embedding("user_mlp", 498_975, 128, batch, "loguniform"),
        Embedding("item_mlp", 427_888, 128, batch, "loguniform"),
        Dense("mlp", 256 * 256 + 256 * 128 + 128 * 64 + 64 + 64 + 1 + 256 + 128 + 64),
    ), "MovieLens-20M x4x16, batch 1,048,576")


def lstm() -> Workload:
    """LSTM language model on Google Billion Words, as OmniReduce trains it.

    Vocabulary 793,471; input embedding 256; one 2048-unit LSTM projected to
    256; sampled softmax over the vocabulary (256 + bias per word) with 8,192
    samples; 512 sequences x 20 tokens per worker step: about 412M
    parameters, ~99% in the two vocabulary tables.  Word ids follow Zipf
    (exponent ~1.05; the top 100 words are about half of all tokens), so
    popular words overlap across workers.  Estimated ~2% per-worker density
    and ~5% union of 8 (est.).  Sources: OmniReduce (SIGCOMM 2021) settings;
    Billion Words word statistics.
    """
    vocab, tokens = 793_471, 512 * 20
    return Workload("lstm", (
        Embedding("input_embedding", vocab, 256, tokens, "zipf", 1.05),
        Dense("lstm", 4 * 2048 * (256 + 256) + 4 * 2048 + 2048 * 256),
        Embedding("softmax", vocab, 257, tokens + 8192, "zipf", 1.05),
    ), "Billion Words, 512 x 20 tokens, 8,192 sampled softmax")


def bert_base() -> Workload:
    """BERT-base: 30,522 x 768 word embedding (21% of ~110M) plus a dense encoder.

    The word embedding is touched only by the batch's tokens (batch 4 x 384
    tokens per worker, OmniReduce's SQuAD setting for BERT-large); position
    and type embeddings and the 12-layer encoder are dense.  Estimated ~80%
    per-worker density overall, ~85% union (est.): hina falls back to dense.
    Sources: BERT (Devlin et al., 2019) shapes; OmniReduce (SIGCOMM 2021).
    """
    return Workload("bert_base", (
        Embedding("word_embedding", 30_522, 768, 4 * 384, "zipf", 1.05),
        Dense("position_type_embeddings", 512 * 768 + 2 * 768),
        Dense("encoder", 85_054_464 + 768 * 768 + 768),
    ), "word embedding + dense encoder, 4 x 384 tokens")


def vgg19() -> Workload:
    """VGG19: 143,667,240 parameters (torchvision), no sparse layer: fully dense gradients.

    Without a sparsifier every element is non-zero, so hina's index phase
    finds a full union and it finishes with a dense ADD (losing only the
    index, 1/32 of dense).  Source: torchvision.models.vgg19.
    """
    return Workload("vgg19", (Dense("vgg19", 143_667_240),), "dense")


# Criteo-style field sizes for DeepLight: 39 fields, 60,747,983 rows in all, the largest 15.6M
# (est.: a long-tailed split matching those totals; the per-field sizes were not available).
_DEEPLIGHT_FIELDS = (15_600_000, 11_000_000, 8_350_000, 7_050_000, 5_460_000, 4_100_000, 3_200_000,
                     2_200_000, 1_300_000, 830_000, 1_048_958, 286_181, 142_572, 93_145, 40_000, 15_000,
                     12_517, 5_683, 5_461, 3_194, 2_173, 1_460, 633, 583, 305, 105) + (1,) * 13


def deeplight() -> Workload:
    """DeepLight (DeepFwFM on Criteo), as OmniReduce trains it: huge embedding tables, tiny batch.

    39 fields (26 categorical, 13 numeric), 60,747,983 embedding rows of
    dimension 10 in all (largest table 15.6M rows), batch 2,048: each step
    touches at most 39 x 2,048 rows of 10 floats.  Estimated ~0.1% per-worker
    density, <= ~0.8% union of 8 (est.).  The DNN part (weights pruned 90%
    in DeepLight) is small and modelled dense.  Sources: DeepLight (Deng et
    al., WSDM 2021); OmniReduce (SIGCOMM 2021) settings.
    """
    batch = 2_048
    layers: list[Layer] = [Embedding(f"field{i:02d}", rows, 10, batch, "loguniform")
                           for i, rows in enumerate(_DEEPLIGHT_FIELDS)]
    layers.append(Dense("dnn", 39 * 10 * 400 + 400 * 400 + 400 * 400 + 400 + 39 * 39))
    return Workload("deeplight", tuple(layers), "Criteo, batch 2,048, dim 10")


PRESETS: dict[str, Callable[[], Workload]] = {
    "ncf": ncf, "lstm": lstm, "bert_base": bert_base, "vgg19": vgg19, "deeplight": deeplight,
}


def preset(name: str, scale: float = 1.0) -> Workload:
    try:
        w = PRESETS[name]()
    except KeyError:
        raise ValueError(f"unknown workload {name!r}: one of {', '.join(PRESETS)}") from None
    return w if scale == 1.0 else w.scaled(scale)
