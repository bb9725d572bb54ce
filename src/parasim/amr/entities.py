"""Entity features of seed 004 and the BM25 score of a pair within its page pair.

Entities (seed 004, section 3.1): spaCy NER on two English texts (the English side and the
translation of the other side), entity texts lower-cased and bagged by group:

- ``geo``: LOC, GPE
- ``org``: ORG, PERSON, FAC, EVENT, NORP, PRODUCT, WORK_OF_ART
- ``date``: DATE, TIME
- ``qty``: QUANTITY, ORDINAL, CARDINAL

and compared per group with the count-vector cosine of the seed's Algorithm 1. The algorithm
divides by zero when a side has no entity of the group; here two empty sides score 1.0 (they
agree: neither mentions one, the rule of the AMR aspects) and one empty side scores 0.0.

BM25 (``bm25s``): within one page pair, the translated sentences of the other side are the
documents and each English sentence a query; a pair's ``bm25`` is the score of its own
translation, and ``bm25_norm`` that score over the best score of the query in the page pair
(1.0: no other sentence of the page matches better; 0.0 when nothing matches).
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Hashable, Sequence

#: Entity groups of seed 004 and their spaCy labels.
ENTITY_GROUPS: dict[str, tuple[str, ...]] = {
    "geo": ("LOC", "GPE"),
    "org": ("ORG", "PERSON", "FAC", "EVENT", "NORP", "PRODUCT", "WORK_OF_ART"),
    "date": ("DATE", "TIME"),
    "qty": ("QUANTITY", "ORDINAL", "CARDINAL"),
}
_GROUP_OF = {label: g for g, labels in ENTITY_GROUPS.items() for label in labels}


def count_cosine(a: Counter, b: Counter) -> float:
    """Seed 004's Algorithm 1: cosine of two entity count vectors (1.0 / 0.0 for empty sides)."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    dot = sum(c * b[k] for k, c in a.items() if k in b)
    norm = math.sqrt(sum(c * c for c in a.values())) * math.sqrt(sum(c * c for c in b.values()))
    return min(1.0, dot / norm)


def entity_cache_key(nlp) -> str:
    """The parse-cache key of the entity bags of a spaCy pipeline (its package and version)."""
    name = nlp.meta.get("parasim_model", nlp.meta.get("name"))
    return f"ents+{name}-{nlp.meta.get('version')}"


def bags_to_json(bags: dict[str, Counter]) -> str:
    """Entity bags as the JSON string the parse cache keeps (sorted keys: stable bytes)."""
    return json.dumps({g: dict(c) for g, c in bags.items()}, sort_keys=True)


def bags_from_json(text: str) -> dict[str, Counter]:
    """Inverse of :func:`bags_to_json`."""
    return {g: Counter(v) for g, v in json.loads(text).items()}


def entity_bags(doc) -> dict[str, Counter]:
    """Lower-cased entity texts of a spaCy ``Doc``, counted per group."""
    bags = {g: Counter() for g in ENTITY_GROUPS}
    for ent in doc.ents:
        group = _GROUP_OF.get(ent.label_)
        if group is not None:
            bags[group][" ".join(ent.text.lower().split())] += 1
    return bags


def entity_features(
    texts_a: Sequence[str | None],
    texts_b: Sequence[str | None],
    nlp,
    batch_size: int = 256,
) -> dict[str, list[float | None]]:
    """Per-group entity cosines of aligned text pairs.

    Args:
        texts_a: English texts.
        texts_b: The other texts (English translations), aligned with ``texts_a``.
        nlp: A spaCy pipeline with NER (:func:`parasim.amr.parse.load_english`).
        batch_size: Texts per ``nlp.pipe`` batch.

    Returns:
        ``{"ent_geo": [...], "ent_org": [...], "ent_date": [...], "ent_qty": [...]}``; None for a
        pair with a missing text.
    """
    if len(texts_a) != len(texts_b):
        raise ValueError(f"{len(texts_a)} texts against {len(texts_b)}")
    unique = sorted({t for t in list(texts_a) + list(texts_b) if t})
    bags = {
        t: entity_bags(doc)
        for t, doc in zip(unique, nlp.pipe(unique, batch_size=batch_size), strict=True)
    }
    out: dict[str, list[float | None]] = {f"ent_{g}": [] for g in ENTITY_GROUPS}
    for a, b in zip(texts_a, texts_b, strict=True):
        for g in ENTITY_GROUPS:
            value = round(count_cosine(bags[a][g], bags[b][g]), 6) if a and b else None
            out[f"ent_{g}"].append(value)
    return out


def bm25_in_groups(
    queries: Sequence[str | None],
    docs: Sequence[str | None],
    groups: Sequence[Hashable],
) -> dict[str, list[float | None]]:
    """BM25 of each (query, doc) pair among the docs of its group (its page pair).

    Args:
        queries: English sentences.
        docs: Their paired sentences (translated), aligned with ``queries``.
        groups: The page pair of each row; rows of one group share one index.

    Returns:
        ``{"bm25": [...], "bm25_norm": [...]}``; None for a row with a missing text.
    """
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its logger to DEBUG
    if not len(queries) == len(docs) == len(groups):
        raise ValueError("queries, docs and groups differ in length")
    rows: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        rows.setdefault(g, []).append(i)
    raw: list[float | None] = [None] * len(queries)
    norm: list[float | None] = [None] * len(queries)
    for idx in rows.values():
        corpus = [docs[i] or "" for i in idx]
        tokens = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
        if not tokens.vocab:  # no indexable word on that side of the page pair
            for i in idx:
                if queries[i] and docs[i]:
                    raw[i], norm[i] = 0.0, 0.0
            continue
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        for k, i in enumerate(idx):
            if not queries[i] or not docs[i]:
                continue
            words = bm25s.tokenize(
                [queries[i]], stopwords="en", show_progress=False, return_ids=False
            )[0]
            words = [w for w in words if w in tokens.vocab]
            scores = index.get_scores(words) if words else [0.0] * len(idx)
            best = float(max(scores))
            raw[i] = float(scores[k])
            norm[i] = float(scores[k]) / best if best > 0 else 0.0
    return {"bm25": raw, "bm25_norm": norm}
