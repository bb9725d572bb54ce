"""Benchmark of the clean stage: real translations kept, noise dropped, speed.

    parasim bench clean parallel --data ../shared/data/parallel
    parasim bench clean site --results results --site wet-boew \\
        --labels tests/data/clean_wet_sample.tsv

``parallel``: the human translations of Flores-200 (devtest, EN-FR and EN-ES) and Tatoeba go
through the rules and the language check (consecutive sentences form a page, so short lines have
neighbours); the share kept must be at least 99 %.

``site``: the clean stage on a site's aligned shards from a finished run (``results/aligned``,
``results/translated``): counts per reason; identical and duplicate pairs left among the kept;
the share of kept pairs that heliport, on lines it can identify alone, puts in the wrong language;
speed (pairs/s, with and without loading heliport); and, with ``--labels``, the share of the
hand-labelled real translations the rules and the language check keep (a pair dropped as a
``duplicate`` or ``furniture`` is kept once elsewhere, so it counts as kept).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from parasim import io

PAGE = 10  # consecutive sentences per pseudo-page in `parallel`


def load_parallel(folder: Path, other: str) -> list[tuple[str, str]]:
    """(English, other) sentence pairs of Flores-200 devtest or Tatoeba in ``folder``."""
    folder = Path(folder)
    flores = {"fr": "fra_Latn", "es": "spa_Latn"}
    tato = {"fr": "fra", "es": "spa"}
    if (folder / "eng_Latn.devtest").exists():
        en = (folder / "eng_Latn.devtest").read_text(encoding="utf-8").splitlines()
        ot = (folder / f"{flores[other]}.devtest").read_text(encoding="utf-8").splitlines()
    else:
        stem = folder / f"tatoeba.{tato[other]}-eng"
        en = Path(f"{stem}.eng").read_text(encoding="utf-8").splitlines()
        ot = Path(f"{stem}.{tato[other]}").read_text(encoding="utf-8").splitlines()
    return list(zip(en, ot, strict=True))


def as_site(pairs: list[tuple[str, str]], other: str) -> tuple[pa.Table, pa.Table]:
    """An aligned table and its translated pages for ``pairs`` (``PAGE`` sentences a page)."""
    rows, pages = [], []
    for start in range(0, len(pairs), PAGE):
        chunk = pairs[start : start + PAGE]
        pid = f"p{start // PAGE:05d}"
        pages.append(
            {
                "pair_id": pid,
                "en_lines": [e for e, _ in chunk],
                "other_lines": [o for _, o in chunk],
            }
        )
        for i, (en, ot) in enumerate(chunk):
            rows.append(
                {
                    "id": io.stable_id(pid, str(i)),
                    "pair_id": pid,
                    "site": "bench",
                    "domain": "bench",
                    "lang_pair": f"en-{other}",
                    "other_lang": other,
                    "en_text": en,
                    "other_text": ot,
                    "other_en": None,
                    "method": "paper",
                    "en_idx": [i],
                    "other_idx": [i],
                    "score": None,
                    "score_emb": None,
                    "en_url": f"https://bench/{pid}-en",
                    "other_url": f"https://bench/{pid}-{other}",
                }
            )
    return io.rows_to_table(rows, io.ALIGNED_SCHEMA), pa.Table.from_pylist(pages)


def survival(pairs: list[tuple[str, str]], other: str, cfg: dict | None = None) -> dict:
    """Share of ``pairs`` the rules and the language check keep (deduplication off)."""
    from parasim.clean import clean_positives

    aligned, translated = as_site(pairs, other)
    kept, dropped, stats = clean_positives([aligned], [translated], {**(cfg or {}), "dedup": False})
    reasons = Counter(dropped[0].column("reason").to_pylist())
    return {
        "pairs": len(pairs),
        "kept": kept[0].num_rows,
        "kept_share": round(kept[0].num_rows / len(pairs), 4),
        "dropped": dict(sorted(reasons.items())),
        "examples": [
            (r["reason"], r["en_text"][:80], r["other_text"][:80])
            for r in dropped[0].to_pylist()[:5]
        ],
        "pairs_per_s": stats["pairs_per_s"],
    }


def _site_tables(results: Path, site: str) -> tuple[list[pa.Table], list[pa.Table]]:
    aligned = [io.read_table(p) for p in sorted((results / "aligned" / site).glob("*.parquet"))]
    translated = [
        io.read_table(p, columns=["pair_id", "en_lines", "other_lines"])
        for p in sorted((results / "translated" / site).glob("*.parquet"))
    ]
    if not aligned:
        raise SystemExit(f"no aligned shards in {results / 'aligned' / site}: run the align stage")
    return aligned, translated


def site_report(
    results: Path, site: str, labels: Path | None = None, workers: int = 2, repeat: int = 3
) -> dict:
    """The clean stage on a finished run's site: counts, what is left, speed, labelled recall.

    Speed: the best of ``repeat`` runs with ``workers`` processes, each from cold per-text
    caches (heliport's model loaded once before, timed apart); CPU time counts the worker
    processes too.
    """
    from parasim.clean import clean_positives, langid, rules

    aligned, translated = _site_tables(results, site)
    t0 = time.perf_counter()
    langid._identifier()
    load_s = time.perf_counter() - t0
    timings = []
    for _ in range(max(1, repeat)):
        rules.clear_caches()
        before, t1 = os.times(), time.perf_counter()
        kept, dropped, stats = clean_positives(aligned, translated, workers=workers)
        after, wall = os.times(), time.perf_counter() - t1
        cpu = sum(after[:4]) - sum(before[:4])  # user + system, this process and its workers
        timings.append((wall, cpu))
    run_s, cpu_s = min(timings)
    k = pa.concat_tables(kept).to_pylist()
    d = pa.concat_tables(dropped).to_pylist()
    n_in = stats["aligned_in"]

    identical = sum(
        rules.letters_only(r["en_text"]) == rules.letters_only(r["other_text"]) for r in k
    )
    keys = Counter((r["en_text"], r["other_text"]) for r in k)
    lid = langid.LanguageId()
    long_en = [r["en_text"] for r in k if langid.letters(r["en_text"]) >= lid.min_letters]
    long_ot = [r for r in k if langid.letters(r["other_text"]) >= lid.min_letters]
    wrong_en = sum(x not in ("eng", "und") for x in lid.identify(long_en))
    wrong_ot = sum(
        lab not in (langid.iso3(r["other_lang"]), "und")
        for r, lab in zip(long_ot, lid.identify([r["other_text"] for r in long_ot]), strict=True)
    )
    wrong_any = sum(
        1
        for r, le, lo in zip(
            k,
            lid.identify([r["en_text"] for r in k]),
            lid.identify([r["other_text"] for r in k]),
            strict=True,
        )
        if le not in ("eng", "und") or lo not in (langid.iso3(r["other_lang"]), "und")
    )
    out = {
        "aligned_in": n_in,
        "kept": len(k),
        "kept_distinct": len(keys),
        "dropped_by_reason": {x: stats[x] for x in sorted(stats) if x.startswith("dropped_")},
        "identical_left": identical,
        "exact_duplicates_left": sum(c - 1 for c in keys.values()),
        "wrong_language_kept_identifiable": {
            "en": [wrong_en, len(long_en)],
            "other": [wrong_ot, len(long_ot)],
        },
        "wrong_language_kept_any_label": [wrong_any, len(k)],
        "furniture_flagged": stats.get("furniture_pairs", 0),
        "heliport_load_s": round(load_s, 2),
        "workers": workers,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "clean_s": round(run_s, 3),
        "pairs_per_s": round(n_in / run_s, 1),
        "cpu_s": round(cpu_s, 3),  # CPU time of the process, its threads and workers
        "pairs_per_cpu_s": round(n_in / cpu_s, 1),
        "pairs_per_s_with_load": round(n_in / (run_s + load_s), 1),
    }
    if labels:
        reason = {r["id"]: r["reason"] for r in d}
        present = {r["id"] for r in k} | set(reason)
        with open(labels, encoding="utf-8") as fh:
            lab = list(csv.DictReader((x for x in fh if not x.startswith("#")), delimiter="\t"))
        absent = [r for r in lab if r["id"] not in present]  # its page pair was left out
        lab = [r for r in lab if r["id"] in present]
        real = [r for r in lab if r["label"] == "1"]
        noise = [r for r in lab if r["label"] == "0"]

        def kept_once(r: dict) -> bool:
            return reason.get(r["id"]) in (None, "duplicate", "furniture")

        out["labelled"] = {
            "sample": len(lab) + len(absent),
            "not_aligned_in_this_run": {
                "real": sum(r["label"] == "1" for r in absent),
                "noise": sum(r["label"] == "0" for r in absent),
            },
            "real_translations": len(real),
            "real_kept": sum(kept_once(r) for r in real),
            "real_kept_share": round(sum(kept_once(r) for r in real) / max(1, len(real)), 4),
            "noise": len(noise),
            "noise_dropped": sum(not kept_once(r) for r in noise),
            "real_dropped_examples": [
                (reason.get(r["id"]), r["en_text"][:70], r["other_text"][:70])
                for r in real
                if not kept_once(r)
            ],
        }
    return out


def sample_for_labels(results: Path, site: str, n: int, seed: int, out: Path) -> None:
    """Write ``n`` distinct aligned pairs, drawn at random, as a TSV to label by hand."""
    import random

    aligned, _ = _site_tables(results, site)
    rows = pa.concat_tables(aligned).to_pylist()
    seen, uniq = set(), []
    for r in sorted(rows, key=lambda r: r["id"]):
        key = (r["en_text"], r["other_text"])
        if key not in seen:
            seen.add(key)
            uniq.append(r)
    pick = random.Random(seed).sample(uniq, n)
    with open(out, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["id", "label", "en_text", "other_text"])
        for r in pick:
            w.writerow(
                [r["id"], "", r["en_text"].replace("\t", " "), r["other_text"].replace("\t", " ")]
            )


def main(argv: list[str] | None = None) -> None:
    """``parasim bench clean``: see the module docstring."""
    ap = argparse.ArgumentParser(prog="parasim bench clean", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parallel", help="Flores-200 and Tatoeba: share of real translations kept")
    p.add_argument("--data", default="../shared/data/parallel")
    s = sub.add_parser("site", help="the clean stage on a finished run's site")
    s.add_argument("--results", default="results")
    s.add_argument("--site", required=True)
    s.add_argument(
        "--labels", help="hand-labelled sample (TSV: id, label 1/0, en_text, other_text)"
    )
    s.add_argument("--workers", type=int, default=2, help="processes for the side rules")
    s.add_argument("--repeat", type=int, default=3, help="timed runs (the best is reported)")
    m = sub.add_parser("sample", help="draw aligned pairs to label by hand")
    m.add_argument("--results", default="results")
    m.add_argument("--site", required=True)
    m.add_argument("-n", type=int, default=100)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "parallel":
        res = {}
        for name in ("flores200-devtest", "tatoeba"):
            for lang in ("fr", "es"):
                res[f"{name} en-{lang}"] = survival(
                    load_parallel(Path(args.data) / name, lang), lang
                )
        print(json.dumps(res, indent=1, ensure_ascii=False))
    elif args.cmd == "site":
        labels = Path(args.labels) if args.labels else None
        print(
            json.dumps(
                site_report(Path(args.results), args.site, labels, args.workers, args.repeat),
                indent=1,
                ensure_ascii=False,
            )
        )
    else:
        sample_for_labels(Path(args.results), args.site, args.n, args.seed, Path(args.out))


if __name__ == "__main__":
    main()
