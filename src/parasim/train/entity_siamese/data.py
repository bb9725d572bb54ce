"""The entity-enriched Siamese model's data: corpus pairs joined to the scores stage's entity
cosines, the MLP's inputs, BM25 silver pairs (seed 004 §3.2) and STSb-multi-mt cross-lingual."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from parasim.train.core.data import with_divergent

from .settings import ENTITY_FEATURES, MISSING_VALUE


@dataclasses.dataclass
class Pairs:
    """Sentence pairs with their entity features (``ents``: one row of ``features`` values,
    None where the scores stage has none), labels (0/1 gold, or a probability for silver) and
    corpus folds (None: not a corpus training row)."""

    s1: list[str]
    s2: list[str]
    other_en: list[str | None]
    ents: list[list[float | None]]
    label: list[float]
    lang_pair: list[str]
    partition: list[str]
    fold: list[int | None]
    #: Each row's corpus grade (None: not a corpus row, or a corpus without grades).
    grade: list[str | None] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.grade:
            self.grade = [None] * len(self.label)

    def __len__(self) -> int:
        return len(self.label)

    @staticmethod
    def empty() -> Pairs:
        return Pairs([], [], [], [], [], [], [], [])

    def take(self, idx: Sequence[int]) -> Pairs:
        return Pairs(*([getattr(self, f.name)[i] for i in idx] for f in dataclasses.fields(self)))

    def __add__(self, other: Pairs) -> Pairs:
        return Pairs(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )


class SkipModel(Exception):
    """The model cannot be trained on this input (the message says why)."""


def read_pairs(
    corpus_dir: str | os.PathLike,
    scores: Sequence[str | os.PathLike],
    partition: str,
    split: str,
    features: Sequence[str] = ENTITY_FEATURES,
    grades: str = "binary",
    divergent_per_positive: int = 1,
    seed: int = 0,
) -> tuple[Pairs, Counter]:
    """One corpus partition's split joined to the score rows of the same ``id`` and source
    (:func:`parasim.scores.load`).

    ``binary``: the equivalent and unrelated rows (seed 001's). ``graded``: also, per positive,
    ``divergent_per_positive`` of its divergent rows that have entity scores (a seeded choice;
    ``rows_divergent``), the others counted (``rows_divergent_without_entities_left_out``: a
    mined row has no score row; ``rows_divergent_spare_left_out``).

    Raises:
        SkipModel: there are no score shards, or they have no entity column.
    """
    from parasim.scores import load

    files = sorted((Path(corpus_dir) / "data" / partition).glob(f"{split}-*.parquet"))
    counts: Counter = Counter()
    if not files:
        return Pairs.empty(), counts
    if not scores:
        raise SkipModel("no score shards (the scores stage did not run): no entity features")
    try:
        ds = load(files, list(scores), split=split)
    except FileNotFoundError as exc:
        raise SkipModel(f"no score shards: {exc}") from None
    missing = [f for f in features if f not in ds.column_names]
    if missing:
        raise SkipModel(
            f"the score shards have no {', '.join(missing)} column: the entity features of the "
            "scores stage are missing (scores.entities)"
        )
    has_grade = "grade" in ds.column_names
    if has_grade and grades != "graded":  # seed 001's binary rows: the divergent grade left out
        n = len(ds)
        ds = ds.filter(lambda g: g != "divergent", input_columns="grade")
        counts["rows_divergent_left_out"] += n - len(ds)
    keys = ["sentence1", "sentence2", "label", "lang_pair", "other_en", "fold", *features]
    if has_grade:
        keys += ["grade", "id", "parent_id"]
    cols = ds.select_columns(keys).to_dict()
    ents = [list(r) for r in zip(*(cols[f] for f in features), strict=True)]
    keep = list(range(len(ents)))
    if has_grade and grades == "graded":
        keep, c = with_divergent(
            cols, divergent_per_positive, seed, "entity_siamese",
            eligible=lambda i: any(v is not None for v in ents[i]),
        )  # fmt: skip
        counts["rows_divergent"] += c.pop("divergent")
        names = {"divergent_ineligible": "rows_divergent_without_entities_left_out"}
        counts.update({names.get(k, f"rows_{k}"): v for k, v in c.items()})
    for i in keep:
        counts["rows"] += 1
        counts["rows_without_entities"] += all(v is None for v in ents[i])
    return (
        Pairs(
            [cols["sentence1"][i] for i in keep], [cols["sentence2"][i] for i in keep],
            [cols["other_en"][i] for i in keep], [ents[i] for i in keep],
            [float(cols["label"][i]) for i in keep], [cols["lang_pair"][i] for i in keep],
            [partition] * len(keep),
            [None if cols["fold"][i] is None else int(cols["fold"][i]) for i in keep],
            [cols["grade"][i] for i in keep] if has_grade else [None] * len(keep),
        ),
        counts,
    )  # fmt: skip


def feature_matrix(cos: Sequence[float], pairs: Pairs, n_features: int):
    """MLP inputs: [cosine, entity cosines (missing: :data:`MISSING_VALUE`), missing flag]."""
    import torch

    x = torch.zeros(len(cos), n_features + 2, dtype=torch.float32)
    for i, (c, e) in enumerate(zip(cos, pairs.ents, strict=True)):
        miss = all(v is None for v in e)
        x[i] = torch.tensor(
            [float(c), *(MISSING_VALUE if v is None else float(v) for v in e), float(miss)]
        )
    return x


def bm25_silver_pairs(
    train: Pairs, per_query: int, max_pairs: int | None, seed: int
) -> tuple[Pairs, Counter]:
    """Unlabelled pairs sampled by BM25 within each partition of ``train`` (seed 004 §3.2).

    Queries: the English sides of the aligned (label 1) training pairs; documents: the English
    translations (``other_en``) of the partition's distinct other sides. A query keeps its
    ``per_query`` best hits with a positive score that are neither its own partner nor already a
    training pair. Entities are left to compute (``ents`` None). Deterministic for a seed.
    """
    import bm25s
    import numpy as np

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    counts: Counter = Counter()
    known = set(zip(train.s1, train.s2, strict=True))
    cols: dict[str, list] = {f.name: [] for f in dataclasses.fields(Pairs)}
    for part in sorted(set(train.partition)):
        idx = [i for i, p in enumerate(train.partition) if p == part]
        docs: dict[str, tuple[str, str, str]] = {}
        for i in idx:
            if train.other_en[i] and train.s2[i] not in docs:
                docs[train.s2[i]] = (train.s2[i], train.other_en[i], train.lang_pair[i])
        doc_list = list(docs.values())
        queries = [i for i in idx if train.label[i] == 1]
        counts[f"silver_queries_{part}"] = len(queries)
        if len(doc_list) < 2 or not queries:
            continue
        tokens = bm25s.tokenize([d[1] for d in doc_list], stopwords="en", show_progress=False)
        if not tokens.vocab:
            continue
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        for i in queries:
            words = bm25s.tokenize(
                [train.s1[i]], stopwords="en", show_progress=False, return_ids=False
            )[0]
            words = [w for w in words if w in tokens.vocab]
            if not words:
                counts["silver_queries_no_match"] += 1
                continue
            scores = np.asarray(index.get_scores(words))
            kept = 0
            for j in np.argsort(-scores, kind="stable"):
                if kept >= per_query or scores[j] <= 0:
                    break
                s2, oe, lp = doc_list[j]
                if s2 == train.s2[i] or (train.s1[i], s2) in known:
                    continue
                known.add((train.s1[i], s2))
                for k, v in zip(cols, (train.s1[i], s2, oe, [None], math.nan, lp, part, None, None),
                                strict=True):  # fmt: skip
                    cols[k].append(v)
                kept += 1
    out = Pairs(**cols)
    counts["silver_candidates"] = len(out)
    if max_pairs is not None and len(out) > max_pairs:
        keep = sorted(random.Random(seed).sample(range(len(out)), max_pairs))
        out = out.take(keep)
    counts["silver_pairs"] = len(out)
    return out, counts


def add_entities(pairs: Pairs, nlp, features: Sequence[str]) -> Pairs:
    """``pairs`` with entity cosines of (``s1``, ``other_en``) computed by spaCy NER, with the
    scores stage's groups and rule (:func:`parasim.amr.entities.entity_features`)."""
    from parasim.amr.entities import entity_features

    if not len(pairs):
        return pairs
    enable = [p for p in nlp.pipe_names if p == "ner"] or list(nlp.pipe_names)
    with nlp.select_pipes(enable=enable):
        ents = entity_features(pairs.s1, pairs.other_en, nlp)
    rows = [list(r) for r in zip(*(ents[f] for f in features), strict=True)]
    return dataclasses.replace(pairs, ents=rows)


def read_sts_pairs(sts_dir: str | os.PathLike, lang: str, max_pairs: int | None) -> Pairs | None:
    """STSb-multi-mt dev, cross-lingual: English sentence 1 against sentence 2 in ``lang``; the
    English sentence 2 is the stand-in for the translation of the other side (entities)."""
    from parasim.train.eval.sts import read_stsb

    d = Path(sts_dir)
    if not (d / "stsb-en-dev.csv").is_file() or not (d / f"stsb-{lang}-dev.csv").is_file():
        return None
    en, other = read_stsb(d, "en"), read_stsb(d, lang)
    if len(en) != len(other):
        raise ValueError(f"{d}: stsb-en-dev.csv and stsb-{lang}-dev.csv differ in rows")
    if max_pairs is not None:
        en, other = en[:max_pairs], other[:max_pairs]
    return Pairs([r[0] for r in en], [r[1] for r in other], [r[1] for r in en],
                 [[None]] * len(en), [r[2] for r in en], [f"en-{lang}"] * len(en),
                 ["stsb"] * len(en), [None] * len(en))  # fmt: skip
