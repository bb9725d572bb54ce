"""False negatives among the mined divergences: a random sample to label, and its score.

The mine stage (:mod:`parasim.mine`) keeps, for a positive, lines of the site that are close to its
English side but that its guards do not take for its translation. How often is one a translation
after all? ``eval/mined_labels/RULES.md`` says how a row is labelled (written before any row was
read); this benchmark draws the sample and scores the labels:

    parasim bench mined_labels sample --corpus RUN1/results/corpus RUN2/results/corpus \\
        --n 200 --seed 0 --out eval/mined_labels/sample.tsv
    parasim bench mined_labels score --sample eval/mined_labels/sample.tsv \\
        --labels eval/mined_labels/labels.tsv

``sample`` reads the ``mined`` rows (``negative_kind``) of every corpus given, shuffles them with
the seed and writes the first ``--n`` (the labeller reads ``id``, ``sentence1``, ``sentence2``; the
other columns are for the score). ``score`` prints the share labelled ``translation`` with its
Wilson 95 % interval, overall and per ``diff_kind`` and site, and the labels' sub-reasons.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from parasim.bench.stats_util import wilson

#: The sample's columns: what the labeller reads first, then what only the score uses.
COLUMNS = ("id", "sentence1", "sentence2", "site", "lang_pair", "diff_kind", "mined_similarity")
LABELS = ("translation", "divergent", "unrelated", "unclear")


def mined_rows(corpora: Sequence[str | Path]) -> list[dict]:
    """The mined divergent rows of the corpus folders, in id order."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows = []
    for c in corpora:
        files = sorted(Path(c).glob("data/*/*.parquet"))
        if not files:
            raise SystemExit(f"{c}: no corpus shards (data/<partition>/*.parquet)")
        for f in files:
            t = pq.read_table(f)
            if "negative_kind" not in t.column_names:
                raise SystemExit(f"{f}: a corpus of schema version 1 (no grades)")
            t = t.filter(pc.equal(t["negative_kind"], "mined"))
            rows += t.select(list(COLUMNS)).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def sample(corpora: Sequence[str | Path], n: int, seed: int, out: str | Path) -> list[dict]:
    """Write a seeded random sample of ``n`` mined rows to ``out`` (TSV); return it."""
    rows = mined_rows(corpora)
    random.Random(seed).shuffle(rows)
    picked = rows[:n]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="") as fh:
        fh.write(f"# {n} of {len(rows)} mined rows, seed {seed}: {', '.join(map(str, corpora))}\n")
        w = csv.DictWriter(fh, COLUMNS, delimiter="\t", lineterminator="\n")
        w.writeheader()
        for r in picked:
            w.writerow({k: _cell(r[k]) for k in COLUMNS})
    return picked


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return " ".join(str(v).split()) if v is not None else ""


def _read_tsv(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def score(sample_path: str | Path, labels_path: str | Path) -> dict:
    """The false-negative share of the labelled sample, overall and per kind and site."""
    rows = {r["id"]: r for r in _read_tsv(sample_path)}
    labels = _read_tsv(labels_path)
    unknown = [r["id"] for r in labels if r["id"] not in rows]
    bad = [r["label"] for r in labels if r["label"] not in LABELS]
    if unknown or bad:
        raise SystemExit(f"labels: ids not in the sample {unknown[:5]}, labels unknown {bad[:5]}")
    missing = sorted(set(rows) - {r["id"] for r in labels})

    def share(items: list[dict]) -> dict:
        judged = [r for r in items if r["label"] != "unclear"]
        k = sum(r["label"] == "translation" for r in judged)
        return {"translation": k, "labelled": len(judged), "share": round(k / len(judged), 4)
                if judged else None, "wilson95": wilson(k, len(judged))}  # fmt: skip

    out = {
        "rows": len(labels),
        "unlabelled": missing,
        "all": share(labels),
        "labels": dict(Counter(r["label"] for r in labels)),
        "sub_reasons": dict(Counter(f"{r['label']}/{r.get('sub_reason', '')}" for r in labels)),
    }
    for key in ("diff_kind", "site"):
        groups: dict[str, list[dict]] = {}
        for r in labels:
            groups.setdefault(rows[r["id"]][key], []).append(r)
        out[f"by_{key}"] = {g: share(items) for g, items in sorted(groups.items())}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="parasim bench mined_labels", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="draw the rows to label")
    s.add_argument("--corpus", nargs="+", required=True, help="graded corpus folders")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    c = sub.add_parser("score", help="the false-negative share of the labels")
    c.add_argument("--sample", required=True)
    c.add_argument("--labels", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "sample":
        picked = sample(args.corpus, args.n, args.seed, args.out)
        print(f"{len(picked)} rows -> {args.out}")
    else:
        print(json.dumps(score(args.sample, args.labels), indent=1))
    return 0
