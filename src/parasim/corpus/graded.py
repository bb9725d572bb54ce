"""The corpus's grades: ``equivalent`` (the kept positives), ``divergent`` (a near-translation
that changes something) and ``unrelated`` (seed 001's hard negatives), mirroring REFreSD's
labels (no / some meaning difference / unrelated); and how hard each tier is for an untrained
encoder.

The divergent tier has two sources (issue 49):

- ``synthetic``: the divergences stage's valid rows of seed 000 (lexical substitution, phrase
  replacement, subtree deletion), each with its parent positive (``seed_id``);
- ``mined``: the mine stage's natural divergences (:mod:`parasim.mine`): a positive's English
  side with another line of the site that is close to it but not its translation.

A divergent row takes the split and fold of its parent positive, and is dropped (counted by
reason) when the parent is not in the corpus, when its English sentence is a positive's English
in the other split, or, for a mined row, when the mined line's page pair is in the other split
(the next candidate of the same positive is tried first). :func:`hardness` measures each tier
against the positives with the untrained encoder: ROC AUC of the cosine and the accuracy of the
best threshold on a balanced sample.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from parasim.mine.diff import differences, span_structs
from parasim.partition import DivergentSettings, seeded_key

log = logging.getLogger(__name__)

EQUIVALENT, DIVERGENT, UNRELATED = "equivalent", "divergent", "unrelated"
GRADES = (EQUIVALENT, DIVERGENT, UNRELATED)
#: The tiers :func:`hardness` measures against the positives: each grade of negative, and the
#: divergent grade's two sources alone.
TIERS = ("unrelated", "divergent", "synthetic", "mined")
#: The divergences stage's columns the divergent tier reads (the command reads no others).
SYNTHETIC_COLUMNS = ("id", "seed_id", "type", "side", "en_text", "other_text", "checks_failed")
#: The mine stage's columns the divergent tier reads.
MINED_COLUMNS = (
    "id", "positive_id", "pair_id", "cand_pair_id", "en_text", "other_text", "en_url",
    "other_url", "en_idx", "other_idx", "rank", "similarity", "kind", "spans",
)  # fmt: skip


def _base(parent: Mapping[str, Any], row_id: str, source: str, kind: str) -> dict:
    """A divergent row's fields taken from its parent positive's corpus row."""
    return {
        **{k: parent[k] for k in ("lang_pair", "partition", "domain", "site", "split", "fold")},
        "id": row_id,
        "label": 0,
        "source": source,
        "align_score": None,
        "cosine": None,
        "topic": None,
        "grade": DIVERGENT,
        "negative_kind": kind,
        "parent_id": parent["id"],
    }


def synthetic_rows(divergences: pa.Table | None) -> Iterator[dict]:
    """The divergences stage's valid variants (its equivalent rows left out), as candidate
    rows: their texts, their parent's id and what differs; in table order, a record batch at
    a time (the whole table's rows are never Python objects at once)."""
    if divergences is None or not divergences.num_rows:
        return
    for batch in divergences.select(list(SYNTHETIC_COLUMNS)).to_batches(max_chunksize=50_000):
        for r in batch.to_pylist():
            if r["type"] == "equivalent" or r["checks_failed"]:
                continue
            yield r


def mined_rows(mined: pa.Table | None) -> dict[str, list[dict]]:
    """The mine stage's rows by positive, best first."""
    by_positive: dict[str, list[dict]] = defaultdict(list)
    if mined is None:
        return by_positive
    for r in mined.select(list(MINED_COLUMNS)).to_pylist():
        by_positive[r["positive_id"]].append(r)
    for rows in by_positive.values():
        rows.sort(key=lambda r: r["rank"])
    return by_positive


def divergent_rows(
    final: Sequence[dict],
    divergences: pa.Table | None,
    mined: pa.Table | None,
    splits: Mapping[str, tuple[str, int | None]],
    cfg: DivergentSettings,
    dropped: Counter,
) -> tuple[list[dict], int]:
    """The divergent tier of a corpus whose positives and negatives are ``final``, and the
    candidate rows read for it (each one a row out or a drop counted in ``dropped``).

    Args:
        final: the corpus rows of the other grades (split, fold and partition set).
        divergences: the divergences stage's rows (all sites), or None.
        mined: the mine stage's rows (all sites), or None.
        splits: page pair -> (split, fold).
        cfg: the ``corpus.divergent`` section.
        dropped: counts of the rows dropped, by reason.
    """
    from parasim.clean.rules import normalize

    parents = {r["id"]: r for r in final if r["grade"] == EQUIVALENT}
    english_splits: dict[str, set[str]] = defaultdict(set)
    for r in parents.values():
        english_splits[normalize(r["sentence1"])].add(r["split"])
    out: list[dict] = []
    n_in = 0

    def other_split(sentence1: str, split: str) -> bool:
        return bool(english_splits.get(normalize(sentence1), {split}) - {split})

    for d in synthetic_rows(divergences) if cfg.synthetic else ():
        n_in += 1
        parent = parents.get(d["seed_id"])
        if parent is None:
            dropped["divergent_parent_not_in_corpus"] += 1
            continue
        if other_split(d["en_text"], parent["split"]):
            dropped["divergent_english_in_other_split"] += 1
            continue
        side = "en" if d["side"] == "en" else "other"
        ref = parent["sentence1"] if side == "en" else parent["sentence2"]
        diff = differences(ref, d["en_text"] if side == "en" else d["other_text"])
        row = _base(parent, d["id"], "synthetic-divergence", "synthetic")
        row.update(
            sentence1=d["en_text"],
            sentence2=d["other_text"],
            **{k: parent[k] for k in ("pair_id", "pair_id2", "url1", "url2", "idx1", "idx2")},
            divergence_type=d["type"],
            diff_side=side,
            diff_spans=span_structs(diff.b_spans),
            diff_kind=diff.kind or "other",
            mined_similarity=None,
        )
        out.append(row)
    by_positive = mined_rows(mined) if cfg.mined else {}
    n_in += sum(map(len, by_positive.values()))
    for pid, cands in by_positive.items():
        parent = parents.get(pid)
        if parent is None:
            dropped["divergent_parent_not_in_corpus"] += len(cands)
            continue
        taken = 0
        for m in cands:
            if taken == cfg.mined_per_positive:
                dropped["mined_spare_unused"] += 1
                continue
            cand_split = splits.get(m["cand_pair_id"])
            if cand_split is None or cand_split[0] != parent["split"]:
                dropped["mined_across_test_train"] += 1
                continue
            row = _base(parent, m["id"], "mined-divergence", "mined")
            row.update(
                sentence1=m["en_text"],
                sentence2=m["other_text"],
                pair_id=m["pair_id"],
                pair_id2=m["cand_pair_id"],
                url1=m["en_url"],
                url2=m["other_url"],
                idx1=m["en_idx"],
                idx2=m["other_idx"],
                divergence_type=None,
                diff_side="other",
                diff_spans=m["spans"],
                diff_kind=m["kind"],
                mined_similarity=m["similarity"],
            )
            out.append(row)
            taken += 1
    return out, n_in


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC AUC of scores ``pos`` above ``neg`` (Mann-Whitney U, ties at their average rank)."""
    from scipy.stats import rankdata

    r_pos = rankdata(np.concatenate([pos, neg]))[: len(pos)].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def hardness_groups(hard: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """A corpus's hardness figures (``corpus_stats.json``'s ``hardness``) as ``(partition,
    {tier: figures})``: the whole corpus (``all``) first, then each partition; the card and the
    yield report print them so."""
    if not hard.get("all"):
        return []
    return [("all", hard["all"]), *sorted((hard.get("partitions") or {}).items())]


def _best_accuracy(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    """The best accuracy of one threshold on the cosine (positives above it), and the
    threshold."""
    scores = np.concatenate([pos, neg])
    labels = np.concatenate([np.ones(len(pos)), np.zeros(len(neg))])
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order]
    tp = np.cumsum(y)  # predicting positive for the first k+1
    fp = np.cumsum(1 - y)
    correct = tp + (len(neg) - fp)
    best = int(np.argmax(correct))
    all_neg = len(neg)  # threshold above everything
    if all_neg >= correct[best]:
        return all_neg / len(scores), float(s[0]) + 1e-6
    return float(correct[best] / len(scores)), float(s[best])


def _sample(rows: Sequence[dict], n: int, seed: int, tag: str) -> list[dict]:
    return sorted(rows, key=lambda r: seeded_key(seed, "hardness", tag, r["id"]))[:n]


def hardness_sample(
    rows: Sequence[dict], sample: int, seed: int, picked_out: list[dict] | None = None
) -> dict[str, list[dict]]:
    """The rows :func:`hardness` measures: per tier (and the positives, ``equivalent``) up to
    ``sample`` rows, the first in a seeded order of their ids, so the sample of a union of
    row sets is drawn from the union of their samples: ``picked_out`` (when given) receives
    the rows drawn, for the caller to measure several partitions together without encoding
    any text twice."""
    tiers = {
        "equivalent": [r for r in rows if r["grade"] == EQUIVALENT],
        "unrelated": [r for r in rows if r["grade"] == UNRELATED],
        "divergent": [r for r in rows if r["grade"] == DIVERGENT],
        "synthetic": [r for r in rows if r.get("negative_kind") == "synthetic"],
        "mined": [r for r in rows if r.get("negative_kind") == "mined"],
    }
    picked = {t: _sample(rs, sample, seed, t) for t, rs in tiers.items()}
    if picked_out is not None:
        seen = {id(r) for r in picked_out}
        for r in (r for rs in picked.values() for r in rs):
            if id(r) not in seen:
                seen.add(id(r))
                picked_out.append(r)
    return picked


def hardness(
    rows: Sequence[dict],
    encoder: Callable[[list[str]], np.ndarray],
    sample: int,
    seed: int,
    picked_out: list[dict] | None = None,
) -> dict[str, dict[str, Any]]:
    """How well the untrained ``encoder``'s cosine tells the positives from each tier.

    For each tier of :data:`TIERS` with rows: up to ``sample`` of its rows and as many
    positives (seeded, :func:`hardness_sample`), the ROC AUC of the cosine of the two
    sentences and the accuracy of its best threshold on that balanced sample (1.0: the tier
    teaches the encoder nothing; 0.5: it cannot tell them apart).
    """
    return hardness_of(hardness_sample(rows, sample, seed, picked_out), encoder)


def hardness_of(
    picked: Mapping[str, Sequence[dict]], encoder: Callable[[list[str]], np.ndarray]
) -> dict[str, dict[str, Any]]:
    """:func:`hardness` of the rows :func:`hardness_sample` drew."""
    texts = sorted({r[k] for rs in picked.values() for r in rs for k in ("sentence1", "sentence2")})
    if not texts:
        return {}
    vecs = np.asarray(encoder(texts), dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    at = {t: i for i, t in enumerate(texts)}

    def cosines(rs: Sequence[dict]) -> np.ndarray:
        return np.array([float(vecs[at[r["sentence1"]]] @ vecs[at[r["sentence2"]]]) for r in rs])

    out: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        neg_rows = picked[tier]
        n = min(len(neg_rows), len(picked["equivalent"]))
        if n == 0:
            continue
        pos = cosines(picked["equivalent"][:n])
        neg = cosines(neg_rows[:n])
        acc, threshold = _best_accuracy(pos, neg)
        out[tier] = {
            "roc_auc": round(_auc(pos, neg), 4),
            "best_accuracy": round(acc, 4),
            "threshold": round(threshold, 4),
            "pairs": n,
            "mean_cosine_positive": round(float(pos.mean()), 4),
            "mean_cosine_tier": round(float(neg.mean()), 4),
        }
    return out
