"""Negative selection, Algorithm 1 of the seed paper, vectorized; plus the plain reference loop.

For every positive (English sentence S of page pair D, partition P) with dominant topic T of D:

* candidates: positives of *other* page pairs of P whose dominant topic is T (and, when groups
  are given, in the same group, e.g. the same test/train split);
* keep those with ``lo < cosine(M(S), M(s)) < hi`` (the paper: 0.80-0.90 for OpenAI GPT);
* false-negative guard, a candidate s with counterpart s' is rejected when
  - the normalized text of s or s' equals that of S or of S's counterpart (normalized: case-folded,
    non-word characters dropped, whitespace collapsed), or
  - s, or the English translation of s' (``other_en``), is a near-duplicate of S: cosine of
    word-count vectors (case-folded ``\\w+`` tokens, stopwords kept) >= ``near_dup_cosine``
    (0.8), decided on exact integer counts (:func:`is_near_duplicate`);
* the paper takes n per S "at random" among in-band candidates; here the choice is made
  deterministic, shared by both implementations: candidates are ranked by a seeded 64-bit hash of
  (S id, candidate id) and the first ``n_per_sentence`` valid ones are kept;
* the negative pair is (S, other-language counterpart of s).

Then, per partition, the negatives are sampled (seeded hash order) down to the number of
positives (the paper's balance). :func:`select_negatives` runs the vectorized version (one matrix
product per topic block and row chunk; guards on the in-band pairs only);
:func:`select_reference` is the paper's loop in plain Python and gives the same rows.
Cosines are computed in float64 in both, so the band test agrees.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import re
import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from parasim.accel import blas_controller
from parasim.config import Settings
from parasim.io import NEGATIVES_SCHEMA, stable_id
from parasim.negatives.vectors import row_norms, unit_rows
from parasim.partition import CorpusConfig, partition_column, split_groups

log = logging.getLogger(__name__)

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_WORD = re.compile(r"\w+")


@dataclasses.dataclass(frozen=True)
class SelectConfig(Settings, section="negatives.select"):
    """The ``negatives.select`` config section.

    Attributes:
        band: open cosine interval (lo, hi); the paper's 0.80-0.90 was set for OpenAI GPT.
            "auto": take it from :func:`parasim.negatives.calibrate.calibrate_band` (pass its
            result as ``band=``).
        n_per_sentence: negatives per English sentence S (paper: 10).
        seed: seed of the candidate ranking and of the balance.
        near_dup_cosine: word-count cosine at or above which a candidate is a near-duplicate of S.
        within: "split" (default; candidates from the same test/train side as S, so no page text
            crosses the test/train line), "fold" (same fold too), or "none".
        balance: sample the negatives down to the number of positives per partition (paper).
        block_elems: matrix elements per row chunk of the vectorized version (memory bound).
        threads: topic blocks the vectorized version selects at once, each with a one-thread
            matrix product (1: one block after another, the product on all BLAS threads). The
            output does not depend on it.
    """

    band: Sequence[float] | str
    n_per_sentence: int
    seed: int
    near_dup_cosine: float
    within: str
    balance: bool
    block_elems: int
    threads: int

    def __post_init__(self) -> None:
        if self.within not in ("split", "fold", "none"):
            raise ValueError(f"negatives.select.within: split, fold or none, not {self.within!r}")
        if self.band != "auto":
            lo, hi = self.band
            if not -1 <= lo < hi <= 1:
                raise ValueError(f"negatives.select.band: need -1 <= lo < hi <= 1, got {self.band}")
        if self.n_per_sentence < 1:
            raise ValueError("negatives.select.n_per_sentence: must be >= 1")
        if self.threads < 1:
            raise ValueError("negatives.select.threads: must be >= 1")


# ------------------------------------------------------------------ shared pieces


def _words(text: str | None) -> list[str]:
    """Case-folded ``\\w+`` tokens (what both functions below read)."""
    return _WORD.findall((text or "").casefold())


def normalize_text(text: str | None) -> str:
    """Case-folded words joined by one space (punctuation and spacing differences vanish)."""
    return " ".join(_words(text))


def word_counts(text: str | None) -> Counter:
    """Case-folded ``\\w+`` token counts."""
    return Counter(_words(text))


def word_cosine(a: Counter, b: Counter) -> float:
    """Cosine of two word-count vectors (0 when either is empty)."""
    if not a or not b:
        return 0.0
    dot, na2, nb2 = _dot_norms(a, b)
    return dot / math.sqrt(na2 * nb2)


def _dot(a: Counter, b: Counter) -> int:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(w, 0) for w, v in a.items())


def _dot_norms(a: Counter, b: Counter) -> tuple[int, int, int]:
    return _dot(a, b), sum(v * v for v in a.values()), sum(v * v for v in b.values())


def is_near_duplicate(a: Counter, b: Counter, t: float) -> bool:
    """Word-count cosine >= t, decided as ``dot >= t * sqrt(|a|^2 |b|^2)`` on exact integers.

    Counts make ratios such as 12/15 land exactly on a threshold; this form gives the same
    answer in the loop and in the vectorized version (same float operations on the same ints).
    """
    if not a or not b:
        return False
    dot, na2, nb2 = _dot_norms(a, b)
    return dot >= t * math.sqrt(float(na2 * nb2))


def row_key(seed: int, row_id: str) -> int:
    """A seeded 64-bit key of a positive id."""
    return int(hashlib.sha1(f"{seed}\x1f{row_id}".encode()).hexdigest()[:16], 16)


def pair_hash(ui: int, uj: int) -> int:
    """Seeded rank of candidate j for sentence i (``ui``, ``uj`` from :func:`row_key`).

    A short multiply-xorshift mix of ``ui ^ (uj * golden)`` (mod 2**64): cheap enough to compute
    for every pair of a topic block, and the same in Python ints and numpy uint64.
    """
    z = ((ui ^ ((uj * _GOLDEN) & _M64)) * 0xBF58476D1CE4E5B9) & _M64
    return z ^ (z >> 32)


def pair_hash_np(ui: np.ndarray, uj: np.ndarray) -> np.ndarray:
    """:func:`pair_hash` on uint64 arrays (broadcasting; wrap-around arithmetic)."""
    with np.errstate(over="ignore"):
        z = ui ^ (uj * np.uint64(_GOLDEN))
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(32)
        return z


@dataclasses.dataclass
class _Prepared:
    """Per-row arrays both implementations read (built once, outside the timed selection).

    Only arrays (a few bytes a row, the word counts as CSR rows): no column of the positives as
    Python objects, no per-row Counter, no float64 copy of all the vectors (a topic block's rows
    are normalized when the block is selected,
    :func:`~parasim.negatives.vectors.unit_rows`), so that a partition of
    100,000s of positives fits in a few GB.
    """

    n: int
    part: np.ndarray  # int codes
    part_names: list[str]
    doc: np.ndarray  # int codes of pair_id
    topic: np.ndarray  # -1: no topic
    group: np.ndarray  # int codes of the group label
    en_code: np.ndarray  # normalized-text codes (one code space for both languages)
    other_code: np.ndarray
    has_oe: np.ndarray
    ukey: np.ndarray  # uint64
    vectors: np.ndarray  # the input vectors (not copied); L2-normalized in float64 per block
    w_en: Any  # word counts of en_text as CSR rows over one vocabulary
    w_oe: Any  # word counts of other_en (zero rows: no translation)
    sq_en: np.ndarray  # squared norms of the counts (exact integers)
    sq_oe: np.ndarray
    stats: Counter
    # word counts summed per hash bucket (dense, float32): an upper bound of the exact dots,
    # set by the vectorized version (before its guards run) to skip most exact checks
    b_en: np.ndarray | None = None
    b_oe: np.ndarray | None = None


def _codes(values: Sequence[Any]) -> tuple[np.ndarray, list]:
    uniq: dict[Any, int] = {}
    out = np.fromiter((uniq.setdefault(v, len(uniq)) for v in values), np.int64, len(values))
    return out, list(uniq)


class _WordRows:
    """CSR rows of word counts, appended one row at a time over a shared vocabulary."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.indptr = array("q", [0])
        self.indices = array("q")
        self.data = array("d")
        self.sq: list[int] = []

    def add(self, c: Counter | None) -> None:
        """One row (None / empty: a zero row)."""
        sq = 0
        if c:
            sq = sum(v * v for v in c.values())
            vocab = self.vocab
            for w, v in c.items():
                self.indices.append(vocab.setdefault(w, len(vocab)))
                self.data.append(v)
        self.sq.append(sq)
        self.indptr.append(len(self.indices))

    def matrix(self, n_cols: int) -> tuple[Any, np.ndarray]:
        """(CSR matrix, squared norms as float64)."""
        from scipy import sparse

        mat = sparse.csr_matrix(
            (
                np.array(self.data, dtype=np.float64),
                np.array(self.indices, dtype=np.int64),
                np.array(self.indptr, dtype=np.int64),
            ),
            shape=(len(self.sq), max(1, n_cols)),
        )
        return mat, np.array(self.sq, dtype=np.float64)


def _strings(positives: pa.Table, name: str, batch: int = 65_536) -> Iterator[str | None]:
    """The values of a string column, a batch at a time (never the whole column as objects)."""
    col = positives.column(name)
    for start in range(0, len(col), batch):
        yield from col.slice(start, batch).to_pylist()


def _prepare(
    positives: pa.Table,
    topic_of: Mapping[tuple[str, str], int],
    vectors: np.ndarray,
    cfg: SelectConfig,
    partitions: Mapping[str, Mapping[str, Any]],
    groups: Mapping[str, str] | None,
) -> _Prepared:
    n = positives.num_rows
    vectors = np.asarray(vectors)
    if vectors.shape[0] != n:
        raise ValueError(f"vectors: {vectors.shape[0]} rows for {n} positives (one per row needed)")
    parts = partition_column(positives, partitions)
    part, part_names = _codes(parts)
    pair_ids = positives.column("pair_id").to_pylist()
    doc, _ = _codes(pair_ids)
    stats: Counter = Counter()
    topic = np.full(n, -1, dtype=np.int64)
    for i, (p, q) in enumerate(zip(parts, pair_ids, strict=True)):
        t = topic_of.get((p, q))
        if t is None:
            stats["sentences_without_topic"] += 1
        else:
            topic[i] = t
    group, _ = _codes([(groups or {}).get(q, "") for q in pair_ids])
    del parts, pair_ids
    # one pass per text column: normalized-text codes, and word counts straight into CSR rows
    norm_codes: dict[str, int] = {}
    vocab: dict[str, int] = {}
    rows_en, rows_oe = _WordRows(vocab), _WordRows(vocab)
    en_code = np.zeros(n, dtype=np.int64)
    for i, t in enumerate(_strings(positives, "en_text")):
        words = _words(t)  # normalize_text and word_counts of t, one tokenization
        en_code[i] = norm_codes.setdefault(" ".join(words), len(norm_codes))
        rows_en.add(Counter(words))
    other_code = np.fromiter(
        (norm_codes.setdefault(normalize_text(t), len(norm_codes))
         for t in _strings(positives, "other_text")),
        np.int64, n,
    )  # fmt: skip
    has_oe = np.zeros(n, dtype=bool)
    for i, t in enumerate(_strings(positives, "other_en")):
        has_oe[i] = bool(t)
        rows_oe.add(word_counts(t) if t else None)
    del norm_codes
    w_en, sq_en = rows_en.matrix(len(vocab))
    w_oe, sq_oe = rows_oe.matrix(len(vocab))
    del rows_en, rows_oe, vocab
    ukey = np.fromiter((row_key(cfg.seed, i) for i in _strings(positives, "id")), np.uint64, n)
    stats["zero_vectors"] += int((row_norms(vectors) == 0).sum())
    return _Prepared(
        n=n,
        part=part,
        part_names=part_names,
        doc=doc,
        topic=topic,
        group=group,
        en_code=en_code,
        other_code=other_code,
        has_oe=has_oe,
        ukey=ukey,
        vectors=vectors,
        w_en=w_en,
        w_oe=w_oe,
        sq_en=sq_en,
        sq_oe=sq_oe,
        stats=stats,
    )


def _band_of(band: Any, part_name: str, cfg: SelectConfig) -> tuple[float, float]:
    if band is None:
        if cfg.band == "auto":
            raise ValueError(
                "negatives.select.band is 'auto': pass band= from calibrate_band() "
                "(per partition or one (lo, hi))"
            )
        return float(cfg.band[0]), float(cfg.band[1])
    if isinstance(band, Mapping):
        b = band.get(part_name)
        if b is None:
            raise ValueError(f"band: no calibrated band for partition {part_name!r}")
        if hasattr(b, "band"):
            b = b.band
        return float(b[0]), float(b[1])
    if hasattr(band, "band"):
        band = band.band
    return float(band[0]), float(band[1])


# ------------------------------------------------------------------ vectorized

_NONE = np.uint64((1 << 64) - 1)  # key of "not a candidate": sorts last


def _rowdot(a: Any, b: Any, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    if len(ia) == 0:
        return np.zeros(0)
    return np.asarray(a[ia].multiply(b[ib]).sum(axis=1)).ravel()


def _near_dup(dot: np.ndarray, sa: np.ndarray, sb: np.ndarray, t: float) -> np.ndarray:
    """:func:`is_near_duplicate` on arrays of exact integer dots and squared norms."""
    return (sa > 0) & (sb > 0) & (dot >= t * np.sqrt(sa * sb))


_BUCKETS = 64


def _bucket_counts(w: Any) -> np.ndarray:
    """Rows of word counts folded into ``_BUCKETS`` buckets (word id modulo), dense float32.

    Counts are non-negative, so the dot of two folded rows is at least the dot of the rows
    (it adds the cross terms of words sharing a bucket): a pair whose folded dot is below the
    near-duplicate threshold is no near-duplicate, without the exact sparse dot.
    """
    coo = w.tocoo()
    flat = np.bincount(
        coo.row.astype(np.int64) * _BUCKETS + coo.col % _BUCKETS,
        weights=coo.data,
        minlength=w.shape[0] * _BUCKETS,
    )
    return flat.reshape(w.shape[0], _BUCKETS).astype(np.float32)  # small integers: exact


#: Up to this many pairs, exact dots come from the CSR arrays directly (:func:`_csr_dots`; a
#: sparse row product costs about 0.3 ms a call whatever its size).
_FEW_PAIRS = 512


def _csr_dots(wa: Any, wb: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact dots of CSR rows ``a`` of ``wa`` and ``b`` of ``wb`` (word counts: one entry per
    word in a row), matched by (pair, word) on sorted keys; float64 sums of integer products."""
    k = len(a)
    if k == 0:
        return np.zeros(0)

    def entries(w: Any, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo = w.indptr[r].astype(np.int64)
        ln = w.indptr[r + 1].astype(np.int64) - lo
        pair = np.repeat(np.arange(k, dtype=np.int64), ln)
        pos = np.repeat(lo - np.cumsum(ln) + ln, ln) + np.arange(int(ln.sum()), dtype=np.int64)
        return pair, pair * w.shape[1] + w.indices[pos], w.data[pos]

    pair_a, key_a, val_a = entries(wa, a)
    _, key_b, val_b = entries(wb, b)
    order = np.argsort(key_b, kind="stable")
    key_b, val_b = key_b[order], val_b[order]
    at = np.searchsorted(key_b, key_a)
    hit = at < len(key_b)
    hit[hit] = key_b[at[hit]] == key_a[hit]
    return np.bincount(pair_a[hit], weights=val_a[hit] * val_b[at[hit]], minlength=k)


def _near_dup_pairs(
    pr: _Prepared, a: np.ndarray, b: np.ndarray, b_is_oe: bool, t: float
) -> np.ndarray:
    """:func:`_near_dup` of pairs (English of row a, English (or ``other_en``) of row b).

    The folded-count bound first; exact dots only for the pairs it lets through, from the CSR
    arrays when they are few, else from a sparse row product.
    """
    w_b, b_b, sq_b = (pr.w_oe, pr.b_oe, pr.sq_oe) if b_is_oe else (pr.w_en, pr.b_en, pr.sq_en)
    sa, sb = pr.sq_en[a], sq_b[b]
    maybe = _near_dup(np.einsum("ij,ij->i", pr.b_en[a], b_b[b]), sa, sb, t)
    out = np.zeros(len(a), dtype=bool)
    k = np.nonzero(maybe)[0]
    if len(k) <= _FEW_PAIRS:
        out[k] = _near_dup(_csr_dots(pr.w_en, w_b, a[k], b[k]), sa[k], sb[k], t)
    else:
        out[k] = _near_dup(_rowdot(pr.w_en, w_b, a[k], b[k]), sa[k], sb[k], t)
    return out


def _check(pr: _Prepared, gi: np.ndarray, gj: np.ndarray, t: float, stats: Counter) -> np.ndarray:
    """Whether candidate pairs (S row gi, candidate row gj), all in band, pass the guards.

    The text guard first, then the near-duplicate guard (the costly one) on what is left.
    """
    ok = np.ones(len(gi), dtype=bool)
    ei, oi, ej, oj = pr.en_code[gi], pr.other_code[gi], pr.en_code[gj], pr.other_code[gj]
    same = ok & ((ej == ei) | (ej == oi) | (oj == ei) | (oj == oi))
    stats["rejected_same_text"] += int(same.sum())
    ok &= ~same
    idx = np.nonzero(ok)[0]
    if len(idx):
        a, b = gi[idx], gj[idx]
        dup = _near_dup_pairs(pr, a, b, False, t)
        has = pr.has_oe[gj[idx]]
        if has.any():
            h = idx[has]
            a, b = gi[h], gj[h]
            dup[has] |= _near_dup_pairs(pr, a, b, True, t)
        stats["rejected_near_duplicate"] += int(dup.sum())
        ok[idx[dup]] = False
    return ok


def _select_block(
    rows: np.ndarray,
    pr: _Prepared,
    lo: float,
    hi: float,
    cfg: SelectConfig,
    stats: Counter,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, cosine, rank) arrays of the negatives of every row of one (partition, topic, group)
    block.

    Per row chunk: one float64 matrix product gives the cosines, every in-band pair of different
    pages gets its seeded hash, ``argpartition`` keeps the lowest ``window`` hashes per row, and
    the guards run on the first n of them (on the rest of the window only for rows where one
    failed). A row that runs out of its window before it has n negatives continues over all its
    candidates in hash order (rare).
    """
    m = len(rows)
    n = cfg.n_per_sentence
    window = min(m, n + max(4, n // 2))
    vb = unit_rows(pr.vectors, rows)  # float64, as the reference's
    docb, ub = pr.doc[rows], pr.ukey[rows]
    step = max(1, cfg.block_elems // max(m, 1))
    parts: list[tuple[np.ndarray, ...]] = []
    extra: list[tuple[int, int, float, int]] = []  # rows continued past their window
    for start in range(0, m, step):
        stop = min(m, start + step)
        c = vb[start:stop] @ vb.T
        valid = (c > lo) & (c < hi)
        valid &= docb[start:stop, None] != docb[None, :]
        n_valid = valid.sum(axis=1)
        key = np.where(valid, pair_hash_np(ub[start:stop, None], ub[None, :]), _NONE)
        if window < m:
            cand = np.argpartition(key, window - 1, axis=1)[:, :window]
        else:
            cand = np.broadcast_to(np.arange(m), (stop - start, m))
        ck = np.take_along_axis(key, cand, axis=1)
        order = np.lexsort((cand, ck), axis=1)
        cand = np.take_along_axis(cand, order, axis=1)
        live = np.take_along_axis(valid, cand, axis=1)
        r_loc, w_pos = np.nonzero(live)
        gi = rows[r_loc + start]
        cj_loc = cand[r_loc, w_pos]
        gj = rows[cj_loc]
        # guards on the first n live candidates of each row; on the rest of its window only
        # where one of those failed (r_loc is sorted, w_pos ascending per row)
        n_live = np.bincount(r_loc, minlength=stop - start)
        first_n = _rank_in_group(r_loc, n_live) < n
        ok = np.zeros(len(r_loc), dtype=bool)
        ok[first_n] = _check(pr, gi[first_n], gj[first_n], cfg.near_dup_cosine, stats)
        short = np.bincount(r_loc[ok], minlength=stop - start) < np.minimum(n_live, n)
        more = ~first_n & short[r_loc]
        if more.any():
            ok[more] = _check(pr, gi[more], gj[more], cfg.near_dup_cosine, stats)
        # first n passing per row, in hash order
        acc = np.nonzero(ok)[0]
        racc = r_loc[acc]
        cnt = np.bincount(racc, minlength=stop - start)
        rank = _rank_in_group(racc, cnt)
        keep = rank < n
        sel = acc[keep]
        parts.append((gi[sel], gj[sel], c[r_loc[sel], cj_loc[sel]], rank[keep]))
        # rows short of n with candidates beyond their window: all candidates, hash order
        for r in np.nonzero((cnt < n) & (n_valid > window))[0]:
            stats["rows_past_window"] += 1
            cj = np.nonzero(valid[r])[0]
            cj = cj[np.lexsort((cj, key[r, cj]))][window:]
            got = int(cnt[r])
            gi_r = rows[start + r]
            for b in range(0, len(cj), 4 * n):
                cj_b = cj[b : b + 4 * n]
                gj_b = rows[cj_b]
                cos_b = c[r, cj_b]
                ok_b = _check(pr, np.full(len(gj_b), gi_r), gj_b, cfg.near_dup_cosine, stats)
                for j, cv in zip(gj_b[ok_b].tolist(), cos_b[ok_b].tolist(), strict=True):
                    if got < n:
                        extra.append((int(gi_r), j, cv, got))
                        got += 1
                if got >= n:
                    break
            cnt[r] = got
        stats["candidates_in_band"] += int(n_valid.sum())
        stats["sentences_without_in_band_candidate"] += int((n_valid == 0).sum())
        stats["sentences_all_candidates_rejected"] += int(((n_valid > 0) & (cnt == 0)).sum())
        stats["sentences_short_of_n"] += int(((cnt > 0) & (cnt < n)).sum())
    if extra:
        ei, ej, ec, er = zip(*extra, strict=True)
        parts.append((np.array(ei), np.array(ej), np.array(ec), np.array(er)))
    return _concat(parts)


def _rank_in_group(groups: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of the sorted ``groups`` (``sizes``: the
    bincount of ``groups``)."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.arange(len(groups)) - starts[groups]


def _concat(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    if not parts:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
    return tuple(np.concatenate(col) for col in zip(*parts, strict=True))


def _blocks(pr: _Prepared) -> dict[tuple[int, int, int], np.ndarray]:
    """Rows with a topic, grouped by (partition, topic, group), in ascending row order."""
    rows = np.nonzero(pr.topic >= 0)[0]
    keys = np.stack([pr.part[rows], pr.topic[rows], pr.group[rows]], axis=1)
    order = np.lexsort((rows, keys[:, 2], keys[:, 1], keys[:, 0]))
    rows, keys = rows[order], keys[order]
    cut = np.nonzero(np.any(keys[1:] != keys[:-1], axis=1))[0] + 1
    bounds = np.concatenate([[0], cut, [len(rows)]]) if len(rows) else np.zeros(1, np.int64)
    return {
        tuple(int(x) for x in keys[a]): rows[a:b]
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    }


def _run_vectorized(
    pr: _Prepared, bands: dict[int, tuple[float, float]], cfg: SelectConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, cosine, rank) arrays of every negative, ordered by (i, j).

    With ``cfg.threads > 1`` blocks run in a thread pool, largest first, each with its own
    counts (merged afterwards) and a one-thread BLAS; numpy releases the GIL in the matrix
    work, so the selection of one block overlaps the matrix product of another.
    """
    pr.b_en, pr.b_oe = _bucket_counts(pr.w_en), _bucket_counts(pr.w_oe)
    jobs = []
    for (p, _t, _g), rows in _blocks(pr).items():
        if len(np.unique(pr.doc[rows])) < 2:
            pr.stats["sentences_alone_in_topic"] += len(rows)
            continue
        jobs.append((rows, bands[p]))

    def run(job: tuple[np.ndarray, tuple[float, float]]) -> tuple[tuple, Counter]:
        counts: Counter = Counter()
        rows, (lo, hi) = job
        return _select_block(rows, pr, lo, hi, cfg, counts), counts

    if cfg.threads > 1 and len(jobs) > 1:
        jobs.sort(key=lambda j: -len(j[0]))
        one_blas_thread = blas_controller().limit(limits=1, user_api="blas")
        with one_blas_thread, ThreadPoolExecutor(cfg.threads) as pool:
            done = list(pool.map(run, jobs))
    else:
        done = [run(job) for job in jobs]
    for _, counts in done:
        pr.stats.update(counts)
    gi, gj, cos, rank = _concat([part for part, _ in done])
    # (i, j) is unique: one int64 key gives the order of the reference's sorted tuples
    order = np.argsort(gi * np.int64(max(pr.n, 1)) + gj)
    return gi[order], gj[order], cos[order], rank[order]


# ------------------------------------------------------------------ reference loop


def _row_counts(w: Any, i: int) -> Counter:
    """Row ``i`` of CSR word counts as a Counter (word ids for words: the same dots)."""
    lo, hi = int(w.indptr[i]), int(w.indptr[i + 1])
    return Counter(dict(zip(w.indices[lo:hi].tolist(), map(int, w.data[lo:hi]), strict=True)))


def _run_reference(
    pr: _Prepared, bands: dict[int, tuple[float, float]], cfg: SelectConfig
) -> list[tuple[int, int, float, int]]:
    """The paper's loop: for each S, scan the documents A of its topic, sentence by sentence."""
    docs: dict[tuple[int, int, int], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i in range(pr.n):
        if pr.topic[i] >= 0:
            key = (int(pr.part[i]), int(pr.topic[i]), int(pr.group[i]))
            docs[key][int(pr.doc[i])].append(i)
    vn = unit_rows(pr.vectors)
    wc_en = [_row_counts(pr.w_en, i) for i in range(pr.n)]
    wc_oe = [_row_counts(pr.w_oe, i) if pr.has_oe[i] else None for i in range(pr.n)]
    out = []
    for i in range(pr.n):
        if pr.topic[i] < 0:
            continue
        key = (int(pr.part[i]), int(pr.topic[i]), int(pr.group[i]))
        lo, hi = bands[key[0]]
        found = []
        for d_id, sentences in docs[key].items():  # A: documents with the same topic as D
            if d_id == pr.doc[i]:
                continue
            for j in sentences:
                c = float(np.dot(vn[i], vn[j]))
                if not lo < c < hi:
                    continue
                pr.stats["candidates_in_band"] += 1
                texts_i = (pr.en_code[i], pr.other_code[i])
                if pr.en_code[j] in texts_i or pr.other_code[j] in texts_i:
                    pr.stats["rejected_same_text"] += 1
                    continue
                if is_near_duplicate(wc_en[i], wc_en[j], cfg.near_dup_cosine) or (
                    wc_oe[j] is not None
                    and is_near_duplicate(wc_en[i], wc_oe[j], cfg.near_dup_cosine)
                ):
                    # counted over all in-band candidates here; the vectorized version only
                    # checks (and counts) as many as it needs
                    pr.stats["rejected_near_duplicate"] += 1
                    continue
                found.append((pair_hash(int(pr.ukey[i]), int(pr.ukey[j])), j, c))
        found.sort()
        for r, (_, j, c) in enumerate(found[: cfg.n_per_sentence]):
            out.append((i, j, c, r))
    out.sort()
    return out


# ------------------------------------------------------------------ entry point


def _negative_ids(positives: pa.Table, gi: np.ndarray, gj: np.ndarray) -> np.ndarray:
    """``stable_id("neg", id of S, id of the candidate)`` of every (S row, candidate row), as
    ASCII bytes (numpy ``S`` array: a few bytes each, sorted as the strings are)."""
    ids = positives.column("id").to_pylist()
    out = [np.zeros(0, dtype="S1")]
    for a in range(0, len(gi), 65_536):
        i, j = gi[a : a + 65_536].tolist(), gj[a : a + 65_536].tolist()
        chunk = [
            stable_id("neg", ids[x], ids[y]).encode("ascii") for x, y in zip(i, j, strict=True)
        ]
        out.append(np.array(chunk, dtype=bytes))
    return np.concatenate(out)


#: Columns of the negatives taken from S's row (i) or the candidate's (j): (name, positives').
_FROM_ROWS = {
    "pair_id": ("i", "pair_id"),
    "cand_pair_id": ("j", "pair_id"),
    "site": ("i", "site"),
    "domain": ("i", "domain"),
    "lang_pair": ("i", "lang_pair"),
    "other_lang": ("j", "other_lang"),
    "en_text": ("i", "en_text"),
    "other_text": ("j", "other_text"),
    "other_en": ("j", "other_en"),
    "cand_en_text": ("j", "en_text"),
    "source_id": ("i", "id"),
    "cand_id": ("j", "id"),
    "en_url": ("i", "en_url"),
    "other_url": ("j", "other_url"),
    "en_idx": ("i", "en_idx"),
    "other_idx": ("j", "other_idx"),
}


def _negatives_table(
    positives: pa.Table,
    pr: _Prepared,
    neg_ids: np.ndarray,
    gi: np.ndarray,
    gj: np.ndarray,
    cos: np.ndarray,
    rank: np.ndarray,
) -> pa.Table:
    """The negatives' rows (in the order given): the positives' columns taken at S's row or the
    candidate's (Arrow ``take``: no row as Python objects), ids, partition, cosine, topic, rank."""
    take = {"i": pa.array(gi, type=pa.int64()), "j": pa.array(gj, type=pa.int64())}
    names = np.array(pr.part_names, dtype=object)
    computed = {
        "id": pa.array([x.decode("ascii") for x in neg_ids.tolist()], type=pa.string()),
        "partition": pa.array(names[pr.part[gi]].tolist(), type=pa.string()),
        "cosine": pa.array(cos.astype(np.float32)),
        "topic": pa.array(pr.topic[gi].astype(np.int32)),
        "rank": pa.array(rank.astype(np.int32)),
    }
    cols = []
    for field in NEGATIVES_SCHEMA:
        if field.name in computed:
            col = computed[field.name]
        else:
            side, name = _FROM_ROWS[field.name]
            col = positives.column(name).take(take[side])
        cols.append(col if col.type == field.type else col.cast(field.type))
    return pa.Table.from_arrays(cols, schema=NEGATIVES_SCHEMA).combine_chunks()


def select_negatives(
    positives: pa.Table,
    topics: Any,
    vectors: np.ndarray,
    cfg: SelectConfig | Mapping[str, Any] | None = None,
    corpus_cfg: CorpusConfig | Mapping[str, Any] | None = None,
    band: Any = None,
    method: str = "vectorized",
) -> tuple[pa.Table, dict[str, Any]]:
    """Hard negatives for the positives (Algorithm 1), balanced per partition.

    Args:
        positives: rows of ``POSITIVES_SCHEMA``.
        topics: a :class:`~parasim.negatives.topics.TopicsResult` or a mapping
            (partition, pair_id) -> dominant topic.
        vectors: M(en_text) for every row of ``positives`` (same order).
        cfg: the ``negatives.select`` section.
        corpus_cfg: the ``corpus`` section: partitions, and the split used by ``within``.
        band: overrides ``cfg.band``: (lo, hi), a
            :class:`~parasim.negatives.calibrate.BandResult`, or partition -> either.
        method: "vectorized" or "reference" (the plain loop; same output, slow).

    Returns:
        (rows of :data:`NEGATIVES_SCHEMA` sorted by id, stats with counts by reason per run and
        the band used per partition).
    """
    cfg = SelectConfig.from_config(cfg)
    ccfg = CorpusConfig.from_config(corpus_cfg)
    topic_of = topics.topic_of() if hasattr(topics, "topic_of") else dict(topics)
    groups = None if cfg.within == "none" else split_groups(positives, ccfg, by=cfg.within)
    t0 = time.perf_counter()
    pr = _prepare(positives, topic_of, vectors, cfg, ccfg.partitions, groups)
    bands = {p: _band_of(band, name, cfg) for p, name in enumerate(pr.part_names)}
    t1 = time.perf_counter()
    if method == "vectorized":
        gi, gj, cos, rank = _run_vectorized(pr, bands, cfg)
        t2 = time.perf_counter()
    elif method == "reference":
        chosen = _run_reference(pr, bands, cfg)
        t2 = time.perf_counter()
        # both methods hand over the same (i, j, cosine, rank) rows, here as arrays
        gi, gj, cos, rank = (
            np.array([c[k] for c in chosen], dtype=np.float64 if k == 2 else np.int64)
            for k in range(4)
        )
        del chosen
    else:
        raise ValueError(f"method: 'vectorized' or 'reference', not {method!r}")
    stats = pr.stats
    stats["negatives_selected"] = len(gi)
    # balance first (on ids), build rows only for what is kept
    neg_ids = _negative_ids(positives, gi, gj)
    n_pos = np.bincount(pr.part, minlength=len(pr.part_names))
    sel_part = pr.part[gi]
    per_part: dict[str, dict[str, Any]] = {}
    kept: list[np.ndarray] = []
    for p, name in enumerate(pr.part_names):
        ks = np.nonzero(sel_part == p)[0]
        n_p = int(n_pos[p])
        info = {"positives": n_p, "selected": len(ks), "band": list(bands[p])}
        if cfg.balance and len(ks) > n_p:
            bal = np.fromiter(
                (row_key(cfg.seed, "bal\x1f" + neg_ids[k].decode()) for k in ks.tolist()),
                np.uint64,
                len(ks),
            )
            ks = ks[np.argsort(bal, kind="stable")][:n_p]
        elif cfg.balance and len(ks) < n_p:
            log.warning(
                "%s: %d negatives for %d positives (fewer than the balance asks for)",
                name,
                len(ks),
                n_p,
            )
            stats["partitions_short_of_negatives"] += 1
        info["kept"] = len(ks)
        per_part[name] = info
        kept.append(ks)
    ks = np.concatenate([np.zeros(0, np.int64), *kept])
    ks = ks[np.argsort(neg_ids[ks], kind="stable")]
    stats["negatives_kept"] = len(ks)
    table = _negatives_table(positives, pr, neg_ids[ks], gi[ks], gj[ks], cos[ks], rank[ks])
    out = {
        **dict(stats),
        "partitions": per_part,
        "method": method,
        "seconds_prepare": round(t1 - t0, 4),
        "seconds_select": round(t2 - t1, 4),
    }
    log.info(
        "negatives (%s): %d selected, %d kept after balance, in %.2fs; %s",
        method,
        len(gi),
        len(ks),
        t2 - t1,
        {k: v for k, v in stats.items() if k.startswith(("sentences", "rejected"))},
    )
    return table, out
