"""Benchmarks for synthetic divergences: speed per type, and an untrained REFreSD baseline.

``parasim bench divergences speed [--n 200] [--lexical-n 60] [--lm smollm2]``
    variants/s per perturbation type on Flores-200 EN-FR (generation only; parsing, alignment
    and model loading are reported separately), plus the validity-check shares.

``parasim bench divergences refresd``
    scores each REFreSD dev pair by the share of words an eflomal intersection alignment leaves
    unaligned (the words an alignment-based tagger would tag DIV), and reports the weighted F1 of
    equivalent vs divergent with a threshold (a) learnt on synthetic divergences made from
    Flores/Tatoeba, with no REFreSD label, and (b) tuned on one half of REFreSD and tested on the
    other (2-fold). Published (seed 000): LASER 0.53, Divergent mBERT 0.84.

Both need ``../shared/data`` (the project's real-data folder) and print JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import time
from pathlib import Path

from parasim.flores import read_flores
from parasim.io import POSITIVES_SCHEMA, rows_to_table, stable_id
from parasim.paths import SHARED_DATA
from parasim.train.eval.refresd import read_refresd

DATA = SHARED_DATA


def _load_pairs(data: Path, name: str, lang: str = "fr") -> list[tuple[str, str]]:
    if name == "flores":
        d = data / "parallel" / "flores200-devtest"
        en, other = read_flores("en", d), read_flores(lang, d)
    else:
        code = {"fr": "fra", "es": "spa"}[lang]
        d = data / "parallel" / "tatoeba"
        en = (d / f"tatoeba.{code}-eng.eng").read_text(encoding="utf-8").splitlines()
        other = (d / f"tatoeba.{code}-eng.{code}").read_text(encoding="utf-8").splitlines()
    return list(zip(en, other, strict=True))


def positives_from_pairs(pairs, site: str, lang: str = "fr"):
    """A POSITIVES_SCHEMA table from (en, other) sentence pairs (for tests and benchmarks)."""
    rows = [
        {
            "id": stable_id(site, str(i)),
            "pair_id": stable_id(site, "pair"),
            "site": site,
            "domain": site,
            "lang_pair": f"en-{lang}",
            "other_lang": lang,
            "en_text": en,
            "other_text": other,
            "method": "paper",
            "en_idx": [i],
            "other_idx": [i],
            "en_url": f"{site}:en",
            "other_url": f"{site}:{lang}",
        }
        for i, (en, other) in enumerate(pairs)
    ]
    return rows_to_table(rows, POSITIVES_SCHEMA)


def bench_speed(
    n: int = 200,
    lexical_n: int = 60,
    lm: str = "smollm2",
    data: Path = DATA,
    lm_window: int | None = None,
    lm_max_candidates: int = 5,
    lm_dtype: str = "auto",
) -> dict:
    """Variants/s per type on the first ``n`` Flores EN-FR pairs (lexical: first ``lexical_n``)."""
    from parasim.divergences import make_divergences
    from parasim.stats import Recorder

    def speed(rec: Recorder, t0: float) -> dict:
        st = rec.stats(rounding=3)
        return {
            "seeds": st.counts["n_seeds"],
            "wall_s": round(time.perf_counter() - t0, 1),
            "seconds": dict(st.seconds),
            "variants_per_second": st.figures["variants_per_second"],
            "rows_by_type": st.counts["rows_by_type"],
            "checks": {t: c["valid_share"] for t, c in st.figures["checks"].items()},
            "variant_missing": st.counts["variant_missing"],
        }

    pairs = _load_pairs(data, "flores")
    out: dict = {"load_average": os.getloadavg(), "cores": os.cpu_count()}
    t0, rec = time.perf_counter(), Recorder("divergences")
    make_divergences(
        positives_from_pairs(pairs[:n], "flores"),
        rec,
        {"types": ["phrase_replacement", "subtree_deletion"]},
    )
    out["phrase_subtree"] = speed(rec, t0)
    t0, rec = time.perf_counter(), Recorder("divergences")
    make_divergences(
        positives_from_pairs(pairs[:lexical_n], "flores"),
        rec,
        {
            "types": ["lexical_substitution"],
            "lm": lm,
            "lm_window": lm_window,
            "lm_max_candidates": lm_max_candidates,
            "lm_dtype": lm_dtype,
        },
    )
    out["lexical"] = {"lm": rec.stats().figures["lm"], **speed(rec, t0)}
    out["load_average_end"] = os.getloadavg()
    return out


# --- REFreSD baseline -------------------------------------------------------------------------


def weighted_f1(gold: list[str], pred: list[str], macro: bool = False) -> float:
    """F1 per class averaged with the class supports as weights (as sklearn's 'weighted');
    ``macro=True`` weighs the classes equally."""
    total, out = len(gold), 0.0
    n_classes = len(set(gold))
    for c in sorted(set(gold)):
        tp = sum(g == c and p == c for g, p in zip(gold, pred, strict=True))
        fp = sum(g != c and p == c for g, p in zip(gold, pred, strict=True))
        fn = sum(g == c and p != c for g, p in zip(gold, pred, strict=True))
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        out += f1 / n_classes if macro else f1 * sum(g == c for g in gold) / total
    return out


def best_threshold(
    scores: list[float], gold: list[str], macro: bool = False
) -> tuple[float, float]:
    """Threshold t (divergent when score > t) maximising weighted (or macro) F1: (t, F1)."""
    cands = sorted(set(scores))
    cuts = (
        [cands[0] - 1e-9]
        + [(a + b) / 2 for a, b in zip(cands, cands[1:], strict=False)]
        + [cands[-1]]
    )
    best = (cuts[0], -1.0)
    for t in cuts:
        f = weighted_f1(gold, ["divergent" if s > t else "equivalent" for s in scores], macro)
        if f > best[1]:
            best = (t, f)
    return best


def _is_punct(tok: str) -> bool:
    return not any(ch.isalnum() for ch in tok)


def _punct_idx(tokens: list[str]) -> set[int]:
    return {i for i, t in enumerate(tokens) if _is_punct(t)}


def _unaligned_scores(en_toks, fr_toks, extra_en, extra_fr) -> list[float]:
    from parasim.divergences.wordalign import align_intersection, unaligned_share

    links = align_intersection(en_toks, fr_toks, extra_en, extra_fr)
    return [
        unaligned_share(len(e), len(f), lk, (_punct_idx(e), _punct_idx(f)))
        for e, f, lk in zip(en_toks, fr_toks, links, strict=True)
    ]


def refresd_baseline(data: Path = DATA, synthetic_n: int = 600, seed: int = 13) -> dict:
    """Untrained alignment-based divergence baseline on REFreSD dev (see the module docstring)."""
    from parasim.divergences import make_divergences
    from parasim.divergences.tags import load_spacy, tokens_only
    from parasim.stats import Recorder

    nlp_en, nlp_fr = load_spacy("en"), load_spacy("fr")
    extra = _load_pairs(data, "flores") + _load_pairs(data, "tatoeba")
    extra_en = tokens_only(nlp_en, [" ".join(e.split()) for e, _ in extra])
    extra_fr = tokens_only(nlp_fr, [" ".join(f.split()) for _, f in extra])
    ref = read_refresd(data)
    en = tokens_only(nlp_en, [r["en"] for r in ref])
    fr = tokens_only(nlp_fr, [r["fr"] for r in ref])
    scores = _unaligned_scores(en, fr, extra_en, extra_fr)
    gold = [r["binary"] for r in ref]

    # (a) threshold from synthetic divergences only (no REFreSD label used).
    syn = make_divergences(
        positives_from_pairs(extra[:synthetic_n], "synthetic"),
        Recorder("divergences"),
        {"types": ["phrase_replacement", "subtree_deletion", "lexical_substitution"], "lm": "none"},
        nlp={"en": nlp_en, "fr": nlp_fr},
    )
    syn_rows = syn.select(["type", "en_tokens", "other_tokens"]).to_pylist()
    syn_scores = _unaligned_scores(
        [r["en_tokens"] for r in syn_rows], [r["other_tokens"] for r in syn_rows],
        extra_en, extra_fr,
    )  # fmt: skip
    syn_gold = ["equivalent" if r["type"] == "equivalent" else "divergent" for r in syn_rows]
    # Four variants per seed: macro F1 so the threshold is not pushed to "all divergent".
    t_syn, f_syn = best_threshold(syn_scores, syn_gold, macro=True)
    pred_syn = ["divergent" if s > t_syn else "equivalent" for s in scores]

    # (b) threshold tuned on one stratified half of REFreSD, tested on the other (2-fold).
    rng = random.Random(seed)
    folds: list[list[int]] = [[], []]
    for lab in sorted(set(r["label"] for r in ref)):
        idx = [i for i, r in enumerate(ref) if r["label"] == lab]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[j % 2].append(i)
    fold_f1, fold_t = [], []
    for a, b in ((0, 1), (1, 0)):
        t, _ = best_threshold([scores[i] for i in folds[a]], [gold[i] for i in folds[a]])
        pred = ["divergent" if scores[i] > t else "equivalent" for i in folds[b]]
        fold_f1.append(weighted_f1([gold[i] for i in folds[b]], pred))
        fold_t.append(t)
    t_all, f_all = best_threshold(scores, gold)
    mean = {
        lab: round(sum(s for s, r in zip(scores, ref, strict=True) if r["label"] == lab)
                   / sum(r["label"] == lab for r in ref), 4)
        for lab in sorted(set(r["label"] for r in ref))
    }  # fmt: skip
    syn_mean = {
        t: round(
            sum(s for s, r in zip(syn_scores, syn_rows, strict=True) if r["type"] == t)
            / max(1, sum(r["type"] == t for r in syn_rows)), 4)
        for t in sorted(set(r["type"] for r in syn_rows))
    }  # fmt: skip
    majority = weighted_f1(gold, ["divergent"] * len(gold))
    return {
        "n_pairs": len(ref),
        "extra_pairs_for_eflomal": len(extra),
        "mean_unaligned_share_by_class": mean,
        "synthetic_mean_unaligned_share_by_type": syn_mean,
        "synthetic_threshold": round(t_syn, 4),
        "synthetic_threshold_macro_f1_on_synthetic": round(f_syn, 4),
        "weighted_f1_synthetic_threshold": round(weighted_f1(gold, pred_syn), 4),
        "weighted_f1_2fold_refresd_threshold": round(sum(fold_f1) / 2, 4),
        "fold_thresholds": [round(t, 4) for t in fold_t],
        "weighted_f1_oracle_threshold_all": round(f_all, 4),
        "oracle_threshold": round(t_all, 4),
        "weighted_f1_all_divergent": round(majority, 4),
        "published": {"LASER": 0.53, "Divergent mBERT": 0.84},
    }


def main(argv: list[str] | None = None) -> None:
    """Command line: ``parasim bench divergences {speed,refresd}``."""
    ap = argparse.ArgumentParser(prog="parasim bench divergences")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--n", type=int, default=200)
    sp.add_argument("--lexical-n", type=int, default=60)
    sp.add_argument("--lm", default="smollm2")
    sp.add_argument("--lm-window", type=int, default=None)
    sp.add_argument("--lm-candidates", type=int, default=5)
    sp.add_argument("--lm-dtype", default="auto", help="auto, float32, bfloat16 or float16")
    rp = sub.add_parser("refresd")
    rp.add_argument("--synthetic-n", type=int, default=600)
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not args.data.exists():
        raise SystemExit(f"shared data not found at {args.data}")
    if args.cmd == "speed":
        res = bench_speed(
            args.n,
            args.lexical_n,
            args.lm,
            args.data,
            args.lm_window,
            args.lm_candidates,
            args.lm_dtype,
        )
    else:
        res = refresd_baseline(args.data, args.synthetic_n)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
