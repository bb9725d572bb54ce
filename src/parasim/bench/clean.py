"""Benchmark of the clean stage: real translations kept, noise dropped, speed.

    parasim bench clean parallel --data ../shared/data/parallel
    parasim bench clean site --results results --site wet-boew \\
        --labels tests/data/clean_wet_sample.tsv
    parasim bench clean gold --results results --site python-docs-fr \\
        --gold build/python-docs/gold/paragraphs_en_fr.tsv

``parallel``: the human translations of Flores-200 (devtest, EN-FR and EN-ES) and Tatoeba go
through the rules and the language check (consecutive sentences form a page, so short lines have
neighbours); the share kept must be at least 99 %.

``site``: the clean stage on a site's aligned shards from a finished run (``results/aligned``,
``results/translated``): counts per reason; identical and duplicate pairs left among the kept;
the share of kept pairs that heliport, on lines it can identify alone, puts in the wrong language;
speed (pairs/s, with and without loading heliport); and, with ``--labels``, the share of the
hand-labelled real translations the rules and the language check keep (a pair dropped as a
``duplicate`` or ``furniture`` is kept once elsewhere, so it counts as kept).

``gold``: a finished run's positives against a site's paragraph gold (``parasim bench scale
build``: one row per catalogue entry, ``status`` translated / untranslated / fuzzy). The matching
rule (:func:`gold_report`): texts compare with whitespace normalised (split and joined by one
space); a kept row *matches* a gold row of its page when its English side is contained in the
gold English text and its other side in the gold other text. Precision: kept rows that match a
``translated`` gold row, over the kept rows of the pages the gold covers; a kept row that matches
an ``untranslated`` or ``fuzzy`` row only (English on both sides) is counted apart. Recall: gold
``translated`` rows whose two sides differ (letters only; a translated entry equal to its source,
such as a lone name or code, is counted apart) and that some kept row, or a row dropped as a
``duplicate`` / ``furniture`` of a kept one, matches. A miss is put down to where the gold row
went: its page pair not in the run (``page_left_out``), a side not among the page's parsed lines
(``not_parsed``: ``parse.min_words``, lines merged or split), no aligned row matching it
(``not_aligned``, or ``aligned_elsewhere`` when a row holds its English side with another other
side), else the reason of the dropped row that matches it. Intervals: Wilson 95 %.
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
from parasim.bench.stats_util import wilson
from parasim.flores import read_flores
from parasim.paths import shared_data
from parasim.stats import Recorder

PAGE = 10  # consecutive sentences per pseudo-page in `parallel`
#: The normal quantile of the Wilson intervals here (the figures in BENCHMARKS.md were taken with
#: it; :data:`parasim.bench.stats_util.Z95` is the finer one).
Z = 1.96


def load_parallel(folder: Path, other: str) -> list[tuple[str, str]]:
    """(English, other) sentence pairs of Flores-200 devtest or Tatoeba in ``folder``."""
    folder = Path(folder)
    tato = {"fr": "fra", "es": "spa"}
    if (folder / "eng_Latn.devtest").exists():
        en, ot = read_flores("en", folder), read_flores(other, folder)
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
    rec = Recorder("clean")
    kept, dropped = clean_positives([aligned], [translated], {**(cfg or {}), "dedup": False}, rec)
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
        "pairs_per_s": rec.stats().figures["pairs_per_s"],
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


def site_report(results: Path, site: str, labels: Path | None = None, repeat: int = 3) -> dict:
    """The clean stage on a finished run's site: counts, what is left, speed, labelled recall
    (with the run's page pairs, for the page languages the pair stage measured).

    Speed: the best of ``repeat`` runs, each from cold per-text caches (heliport's model loaded
    once before, timed apart).
    """
    from parasim.clean import clean_positives, langid, rules

    aligned, translated = _site_tables(results, site)
    pairs = [io.read_table(p) for p in sorted((results / "pairs" / site).glob("*.parquet"))]
    t0 = time.perf_counter()
    langid._identifier()
    load_s = time.perf_counter() - t0
    timings = []
    for _ in range(max(1, repeat)):
        rules.clear_caches()
        before, t1 = os.times(), time.perf_counter()
        rec = Recorder("clean")
        kept, dropped = clean_positives(aligned, translated, None, rec, pairs=pairs)
        after, wall = os.times(), time.perf_counter() - t1
        cpu = sum(after[:4]) - sum(before[:4])  # user + system CPU time
        timings.append((wall, cpu))
    run_s, cpu_s = min(timings)
    k = pa.concat_tables(kept).to_pylist()
    d = pa.concat_tables(dropped).to_pylist()
    stats = rec.stats()
    n_in = stats.rows_in

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
        "dropped_by_reason": {f"dropped_{x}": stats.dropped[x] for x in sorted(stats.dropped)},
        "identical_left": identical,
        "exact_duplicates_left": sum(c - 1 for c in keys.values()),
        "wrong_language_kept_identifiable": {
            "en": [wrong_en, len(long_en)],
            "other": [wrong_ot, len(long_ot)],
        },
        "wrong_language_kept_any_label": [wrong_any, len(k)],
        "furniture_flagged": stats.counts.get("furniture_pairs", 0),
        "heliport_load_s": round(load_s, 2),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "clean_s": round(run_s, 3),
        "pairs_per_s": round(n_in / run_s, 1),
        "cpu_s": round(cpu_s, 3),  # CPU time of the process and its threads
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


def _ws(text: str | None) -> str:
    return " ".join((text or "").split())


def _path(url: str) -> str:
    """``en/3.13/about.html`` of ``https://host/en/3.13/about.html``."""
    from urllib.parse import urlsplit

    return urlsplit(url).path.lstrip("/")


def _read_rows(results: Path, site: str, stage: str, columns=None) -> list[dict]:
    """The rows of a finished run's shards of ``stage`` for ``site``."""
    files = sorted((results / stage / site).glob("*.parquet"))
    return [r for p in files for r in io.read_table(p, columns=columns).to_pylist()]


def _judged_rows(
    results: Path, site: str, reclean: dict | None
) -> tuple[list[dict], list[dict], dict | None]:
    """The kept and the dropped rows :func:`gold_report` judges: the run's own, or those of the
    clean stage run again with ``reclean`` (then with its stats)."""
    from parasim.clean import clean_positives

    if reclean is None:
        kept = _read_rows(results, site, "positives", ["id", "en_url", "en_text", "other_text"])
        cols = ["id", "en_url", "en_text", "other_text", "reason"]
        return kept, _read_rows(results, site, "dropped", cols), None
    aligned, trans = _site_tables(results, site)
    pairs = [io.read_table(p) for p in sorted((results / "pairs" / site).glob("*.parquet"))]
    rec = Recorder("clean")
    k, d = clean_positives(aligned, trans, reclean, rec, pairs=pairs)
    return pa.concat_tables(k).to_pylist(), pa.concat_tables(d).to_pylist(), rec.stats().to_dict()


def _recall(
    by_page: dict[str, list[dict]],
    page_lines: dict[str, tuple[set, set]],
    found: dict[int, str | None],
    aligned_en: dict[str, set[str]],
    examples: int,
) -> dict:
    """The gold ``translated`` rows kept, and where the others went (:func:`gold_report`)."""
    from parasim.clean import rules

    real = same = reached = got = 0
    misses: Counter = Counter()
    miss_examples: dict[str, list] = {}
    for path, gs in by_page.items():
        lines = page_lines.get(path)
        for g in gs:
            if g["status"] != "translated":
                continue
            if rules.letters_only(g["en"]) == rules.letters_only(g["other"]):
                same += 1
                continue
            real += 1
            if lines is None:
                why = "page_left_out"
            elif g["en"] not in lines[0] or g["other"] not in lines[1]:
                why = "not_parsed"
            else:
                reached += 1
                if id(g) in found:
                    why = found[id(g)]
                elif any(g["en"] in x for x in aligned_en.get(path, ())):
                    why = "aligned_elsewhere"
                else:
                    why = "not_aligned"
            if why is None:
                got += 1
                continue
            misses[why] += 1
            ex = miss_examples.setdefault(why, [])
            if len(ex) < examples:
                ex.append((g["en"][:80], g["other"][:80]))
    return {
        "real": real, "same": same, "reached": reached, "got": got,
        "misses": misses, "miss_examples": miss_examples,
    }  # fmt: skip


def gold_report(
    results: Path, site: str, gold: Path, examples: int = 5, reclean: dict | None = None
) -> dict:
    """A finished run's positives of ``site`` against a paragraph gold (module docstring).

    ``reclean``: run the clean stage again on the run's aligned shards with these ``clean``
    settings (a mapping as in the config) and judge its output instead of the run's positives
    (``clean_stats``: that run's stats, :meth:`parasim.stats.Stats.to_dict`).
    """
    with open(gold, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    by_page: dict[str, list[dict]] = {}
    for g in rows:
        g["en"], g["other"] = _ws(g["en_text"]), _ws(g["other_text"])
        by_page.setdefault(g["en_path"], []).append(g)
    kept, dropped, stats = _judged_rows(results, site, reclean)
    translated = _read_rows(results, site, "translated", ["en_url", "en_lines", "other_lines"])
    page_lines = {
        _path(t["en_url"]): ({_ws(x) for x in t["en_lines"]}, {_ws(x) for x in t["other_lines"]})
        for t in translated
    }

    def matches(r: dict) -> list[dict]:
        en, ot = _ws(r["en_text"]), _ws(r["other_text"])
        return [
            g for g in by_page.get(_path(r["en_url"]), ()) if en in g["en"] and ot in g["other"]
        ]

    found: dict[int, str | None] = {}  # id(gold row) -> None (kept) or the first drop reason
    k_gold = k_ok = k_untr = k_other = 0
    wrong_examples = []
    for r in kept:
        if _path(r["en_url"]) not in by_page:
            continue
        k_gold += 1
        ms = matches(r)
        good = [g for g in ms if g["status"] == "translated"]
        if good:
            k_ok += 1
        elif ms:
            k_untr += 1
        else:
            k_other += 1
        if not good and len(wrong_examples) < examples:
            wrong_examples.append((r["en_text"][:80], r["other_text"][:80]))
        for g in ms:
            found[id(g)] = None
    for r in dropped:
        if _path(r["en_url"]) not in by_page:
            continue
        rs = r["reason"]
        for g in matches(r):
            if rs in ("duplicate", "furniture"):
                found[id(g)] = None
            elif id(g) not in found:
                found[id(g)] = rs
    aligned_en: dict[str, set[str]] = {}
    for r in kept + dropped:
        aligned_en.setdefault(_path(r["en_url"]), set()).add(_ws(r["en_text"]))
    rc = _recall(by_page, page_lines, found, aligned_en, examples)
    real, reached, got = rc["real"], rc["reached"], rc["got"]
    return {
        "site": site,
        "gold_rows": len(rows),
        "gold_translated_real": real,
        "gold_translated_identical": rc["same"],
        "gold_untranslated_or_fuzzy": sum(g["status"] != "translated" for g in rows),
        "reaching_aligner": reached,
        "kept": got,
        "recall": round(got / real, 4) if real else None,
        "recall_ci95": wilson(got, real, Z),
        "recall_of_reaching": round(got / reached, 4) if reached else None,
        "recall_of_reaching_ci95": wilson(got, reached, Z),
        "misses": dict(rc["misses"].most_common()),
        "kept_rows_on_gold_pages": k_gold,
        "kept_rows_correct": k_ok,
        "kept_rows_untranslated": k_untr,
        "kept_rows_unmatched": k_other,
        "precision": round(k_ok / k_gold, 4) if k_gold else None,
        "precision_ci95": wilson(k_ok, k_gold, Z),
        "kept_rows_off_gold_pages": len(kept) - k_gold,
        "clean_stats": stats,
        "wrong_kept_examples": wrong_examples,
        "miss_examples": rc["miss_examples"],
    }


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
    p.add_argument("--data", default=str(shared_data("parallel")))
    s = sub.add_parser("site", help="the clean stage on a finished run's site")
    s.add_argument("--results", default="results")
    s.add_argument("--site", required=True)
    s.add_argument(
        "--labels", help="hand-labelled sample (TSV: id, label 1/0, en_text, other_text)"
    )
    s.add_argument("--repeat", type=int, default=3, help="timed runs (the best is reported)")
    g = sub.add_parser("gold", help="a finished run's positives against a paragraph gold")
    g.add_argument("--results", default="results")
    g.add_argument("--site", required=True)
    g.add_argument("--gold", required=True, help="paragraphs_en_<lang>.tsv (bench scale build)")
    g.add_argument(
        "--reclean",
        help="clean settings as JSON: run the clean stage again on the run's aligned shards "
        'with them and judge that (e.g. \'{"decision": {"enabled": false}}\')',
    )
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
                site_report(Path(args.results), args.site, labels, args.repeat),
                indent=1,
                ensure_ascii=False,
            )
        )
    elif args.cmd == "gold":
        reclean = json.loads(args.reclean) if args.reclean else None
        report = gold_report(Path(args.results), args.site, Path(args.gold), reclean=reclean)
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        sample_for_labels(Path(args.results), args.site, args.n, args.seed, Path(args.out))


if __name__ == "__main__":
    main()
