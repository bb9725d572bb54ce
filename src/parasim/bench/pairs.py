"""Benchmarks for page pairing and parsing on a static site folder (e.g. WET-BOEW from shared data).

Run ``parasim bench pairs [DATA_DIR]`` (default ``../shared/data``): it prints pairing
precision/recall against the gold for each evidence policy, the pairing parse speed, and the
parse stage's speed and equal-line share with and without a main-content selector.
``parasim bench pairs --content [DATA_DIR]`` scores content evidence (``pairing.evidence:
content``) alone and with the link kinds on WET and on the two-host canada-design site.
"""

from __future__ import annotations

import argparse
import csv
import re
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from parasim.config import Rewrite, SiteConfig
from parasim.io import PAGES_SCHEMA, rows_to_table
from parasim.paths import SHARED_DATA

WET_ORIGIN = "https://wet-boew.example"
DEBIAN_ORIGIN = "https://www.debian.org"
_HTML_LANG_RE = re.compile(r"<html\b[^>]*?\blang\s*=\s*[\"']?([A-Za-z][A-Za-z0-9_-]*)", re.I)


def pages_from_dir(root: str | Path, origin: str) -> pa.Table:
    """A pages table (:data:`parasim.io.PAGES_SCHEMA`) from the ``*.html`` files under ``root``.

    Args:
        root: folder of a static site.
        origin: URL prefix for the files (``origin + "/" + relative path``).

    Returns:
        One row per file, sorted by URL, status 200, ``final_url`` = ``url``, ``declared_lang`` from
        ``<html lang>`` (primary subtag), html decoded as UTF-8 with replacement characters.
    """
    from parasim.pair import norm_lang

    root = Path(root)
    rows = []
    for path in sorted(root.rglob("*.html")):
        if not path.is_file():
            continue
        html = path.read_bytes().decode("utf-8", errors="replace")
        url = origin.rstrip("/") + "/" + path.relative_to(root).as_posix()
        m = _HTML_LANG_RE.search(html[:20_000])
        rows.append(
            {
                "url": url,
                "final_url": url,
                "status": 200,
                "content_type": "text/html",
                "declared_lang": norm_lang(m.group(1)) if m else None,
                "encoding": "utf-8",
                "html": html,
                "depth": 0,
            }
        )
    rows.sort(key=lambda r: r["url"])
    return rows_to_table(rows, PAGES_SCHEMA)


def read_gold(gold_tsv: str | Path, origin: str) -> set[tuple[str, str]]:
    """Gold (en_url, other_url) pairs from a TSV of paths relative to ``origin`` or of absolute
    URLs (a header row is skipped); ``X/`` is read as ``X/index.html``, the name the pair stage
    gives a directory's page."""
    prefix = origin.rstrip("/") + "/"

    def url(value: str) -> str:
        return _dir_index(value if value.startswith(("http://", "https://")) else prefix + value)

    with open(gold_tsv, encoding="utf-8", newline="") as fh:
        return {
            (url(row[0].strip()), url(row[1].strip()))
            for row in csv.reader(fh, delimiter="\t")
            if len(row) >= 2 and row[0].strip() and row[0].strip() not in ("en_path", "en_url")
        }


def pair_metrics(pairs: pa.Table, gold_tsv: str | Path | list[str | Path], origin: str) -> dict:
    """Precision and recall of page pairs against gold TSVs (:func:`read_gold`; several files,
    one per language, are one gold list).

    Returns:
        :func:`judged_metrics`'s figures, and the sorted lists ``fp`` / ``fn`` of
        (en_url, other_url) pairs.
    """
    files = gold_tsv if isinstance(gold_tsv, list) else [gold_tsv]
    gold = set().union(*(read_gold(f, origin) for f in files))
    pred = _predicted(pairs)
    return _scores(pred, gold) | {"fp": sorted(pred - gold), "fn": sorted(gold - pred)}


def wet_site(evidence: tuple[str, ...], main_selector: str | None = "main") -> SiteConfig:
    """The WET-BOEW site as configured for the benchmarks."""
    return SiteConfig(
        name="wet-boew",
        domain="government",
        languages=("en", "fr"),
        start_urls=(WET_ORIGIN + "/index-en.html",),
        allowed_domains=("wet-boew.example",),
        main_selector=main_selector,
        evidence=evidence,
        rewrites=(Rewrite({"en": "-en.html", "fr": "-fr.html"}),),
    )


def benchmark_wet(data_dir: str | Path, repeats: int = 3) -> dict:
    """Print and return pairing and parsing figures on WET-BOEW."""
    from parasim.pair import pair_pages
    from parasim.parse import parse_pairs
    from parasim.stats import Recorder

    site_dir = Path(data_dir) / "sites" / "wet-boew"
    t0 = time.perf_counter()
    pages = pages_from_dir(site_dir / "site", WET_ORIGIN)
    print(f"loaded {pages.num_rows} pages in {time.perf_counter() - t0:.2f}s")
    out: dict = {"pairing": {}, "parse": {}}
    pairs_all = None
    policies = [("hreflang", "toggle", "rewrite"), ("hreflang", "toggle"), ("toggle",)]
    policies += [("hreflang",), ("rewrite",)]
    for one_to_one in (True, False):
        for evidence in policies:
            site = wet_site(evidence)
            best = None
            for _ in range(repeats):
                rec = Recorder("pair", site=site.name)
                t = time.perf_counter()
                pairs = pair_pages(pages, site, n_shards=2, rec=rec, one_to_one=one_to_one)
                dt = time.perf_counter() - t
                best = dt if best is None else min(best, dt)
            m = pair_metrics(pairs, site_dir / "pairs_en_fr.tsv", WET_ORIGIN)
            stats = rec.stats()
            rate = pages.num_rows / best
            print(
                f"pairing evidence={list(evidence)} one_to_one={one_to_one}: pairs={m['n_pred']} "
                f"precision={m['precision']:.4f} recall={m['recall']:.4f} "
                f"({m['tp']}/{m['n_gold']}) conflicts={stats.counts['conflicts']} "
                f"unpaired_en={ {k: v for k, v in stats.dropped.items() if v} } | "
                f"{rate:.0f} pages/s end-to-end, "
                f"{stats.figures['pages_per_s']} pages/s link parsing"
            )
            for fp in m["fp"]:
                print(f"  FP {fp[0][len(WET_ORIGIN) + 1 :]} -> {fp[1][len(WET_ORIGIN) + 1 :]}")
            for fn in m["fn"]:
                print(f"  FN {fn[0][len(WET_ORIGIN) + 1 :]} -> {fn[1][len(WET_ORIGIN) + 1 :]}")
            key = ",".join(evidence) + ("" if one_to_one else ",many_to_one")
            out["pairing"][key] = m | {"pages_per_s": rate}
            if one_to_one and evidence == ("hreflang", "toggle", "rewrite"):
                pairs_all = pairs
    for selector in ("main", None):
        site = replace(wet_site(("hreflang", "toggle", "rewrite")), main_selector=selector)
        best = None
        for _ in range(repeats):
            rec = Recorder("parse", site=site.name)
            t = time.perf_counter()
            lines = parse_pairs(pairs_all, pages, site, rec=rec)
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        n = lines.num_rows
        eq = sum(lines.column("equal_lines").to_pylist())
        print(
            f"parse selector={selector!r}: {n} pairs in {best:.2f}s = {n / best:.1f} pairs/s; "
            f"equal-line pairs {eq}/{n} = {eq / max(n, 1):.1%}; "
            f"selector_missed={rec.counted('selector_missed')} lines={rec.counted('lines')}"
        )
        out["parse"][str(selector)] = {"pairs_per_s": n / best, "equal": eq, "pairs": n}
    return out


CANADA_HOSTS = ("design.canada.ca", "conception.canada.ca")


def _dir_index(url: str) -> str:
    """``X/`` as ``X/index.html`` (the gold lists' convention)."""
    return url + "index.html" if url.endswith("/") else url


def _predicted(pairs: pa.Table) -> set[tuple[str, str]]:
    """The pairs' (en_url, other_url), ``X/`` as ``X/index.html``."""
    en, other = pairs.column("en_url").to_pylist(), pairs.column("other_url").to_pylist()
    return {(_dir_index(a), _dir_index(b)) for a, b in zip(en, other, strict=True)}


def judged_metrics(pairs: pa.Table, gold: set[tuple[str, str]]) -> dict:
    """Precision and recall against a gold list that holds only some of the site's pairs:
    ``precision`` counts every pair not in the gold as wrong; ``judged_precision`` only the
    pairs one of whose pages the gold pairs otherwise (a pair of two pages the gold does not
    know is not judged)."""
    return _scores(_predicted(pairs), gold)


def _scores(pred: set[tuple[str, str]], gold: set[tuple[str, str]]) -> dict:
    tp = pred & gold
    en, other = {a for a, _ in gold}, {b for _, b in gold}
    judged = {p for p in pred if p[0] in en or p[1] in other}
    return {
        "precision": len(tp) / len(pred) if pred else 0.0,
        "judged_precision": len(tp) / len(judged) if judged else 0.0,
        "recall": len(tp) / len(gold) if gold else 0.0,
        "tp": len(tp),
        "n_pred": len(pred),
        "n_judged": len(judged),
        "n_gold": len(gold),
    }


def benchmark_content(
    data_dir: str | Path, settings: dict | None = None, debian_cache: str | Path | None = None
) -> dict:
    """Print and return content pairing figures: content alone, the link kinds alone, both
    (link pairs content contradicts flagged, or dropped), on WET, canada-design (both hosts'
    folders read as one site) and, with ``debian_cache`` (where its archive is extracted),
    debian-www."""
    from parasim.config import SiteConfig
    from parasim.pair import pair_pages
    from parasim.pair.content import ContentPairingSettings, load_content_encoder
    from parasim.stats import Recorder

    data = Path(data_dir) / "sites"
    cs = ContentPairingSettings.from_config(settings)
    c0 = time.process_time()
    encoder = load_content_encoder(cs)
    print(f"encoder {cs.encoder}: loaded in {time.process_time() - c0:.1f} CPU-s")
    canada = data / "canada-design"
    cases = {
        "wet-boew": (
            lambda: pages_from_dir(data / "wet-boew" / "site", WET_ORIGIN),
            lambda: read_gold(data / "wet-boew" / "pairs_en_fr.tsv", WET_ORIGIN),
            lambda ev: wet_site(ev),
        ),
        "canada-design": (
            lambda: pa.concat_tables(
                [pages_from_dir(canada / h, f"https://{h}") for h in CANADA_HOSTS]
            ),
            lambda: read_gold(canada / "gold_en_fr.tsv", f"https://{CANADA_HOSTS[0]}"),
            lambda ev: SiteConfig(
                name="canada-design",
                domain="government",
                languages=("en", "fr"),
                start_urls=(f"https://{CANADA_HOSTS[0]}/",),
                allowed_domains=CANADA_HOSTS,
                main_selector="main",
                evidence=ev,
            ),
        ),
    }
    debian = data / "debian-www" / "debian-www-2018.tar.xz"
    if debian.is_file() and debian_cache is not None:
        from parasim.bench.probe import extracted

        debian_site = extracted(debian, Path(debian_cache))
        cases["debian-www"] = (
            lambda: pages_from_dir(debian_site, DEBIAN_ORIGIN),
            lambda: set().union(
                *(
                    read_gold(data / "debian-www" / f"gold_en_{lang}.tsv", DEBIAN_ORIGIN)
                    for lang in ("fr", "es")
                )
            ),
            lambda ev: SiteConfig(
                name="debian-www",
                domain="general",
                languages=("en", "es", "fr"),
                start_urls=(DEBIAN_ORIGIN + "/index.en.html",),
                allowed_domains=("www.debian.org",),
                main_selector="#content",
                evidence=ev,
                rewrites=(Rewrite({"en": ".en.html", "es": ".es.html", "fr": ".fr.html"}),),
            ),
        )
    links = ("hreflang", "toggle", "rewrite")
    policies = [(("content",), "flag"), (links, "flag"), ((*links, "content"), "flag")]
    policies += [((*links, "content"), "drop")]
    out: dict = {}
    for name, (load_pages, load_gold, make_site) in cases.items():
        if name != "debian-www" and not (data / name).is_dir():
            print(f"{name}: not in {data}, skipped")
            continue
        pages, gold = load_pages(), load_gold()
        for evidence, mode in policies:
            rec = Recorder("pair", site=name)
            site = replace(make_site(evidence), content_disagrees=mode)
            c0 = time.process_time()
            pairs = pair_pages(pages, site, 2, rec=rec, content=settings, encoder=encoder)
            cpu = time.process_time() - c0
            m = judged_metrics(pairs, gold)
            counts = rec.stats().counts
            label = ",".join(evidence) + (" (content_disagrees: drop)" if mode == "drop" else "")
            print(
                f"{name} evidence={label}: pairs={m['n_pred']} "
                f"P={m['precision']:.4f} judged P={m['judged_precision']:.4f} "
                f"({m['n_judged']} judged) R={m['recall']:.4f} ({m['tp']}/{m['n_gold']}) "
                f"CPU {cpu:.1f} s; content pairs {counts.get('content_pairs')}, confirmed "
                f"{counts.get('content_confirmed')}, disagree {counts.get('content_disagrees')}"
            )
            out[f"{name}:{label}"] = m | {"cpu_s": round(cpu, 2)}
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: ``parasim bench pairs [DATA_DIR] [--repeats N] [--content [--settings-json
    J]]``."""
    import json

    ap = argparse.ArgumentParser(prog="parasim bench pairs", description=__doc__)
    ap.add_argument("data_dir", nargs="?", default=str(SHARED_DATA))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--content", action="store_true", help="content evidence on WET, canada-design")
    ap.add_argument("--settings-json", help="content_pairing settings as JSON (with --content)")
    ap.add_argument(
        "--debian-cache",
        default=str(Path.home() / ".cache" / "parasim" / "sites" / "debian-www"),
        help="where debian-www is extracted (once) for --content; '' leaves it out",
    )
    args = ap.parse_args(argv)
    if args.content:
        cache = args.debian_cache or None
        benchmark_content(args.data_dir, json.loads(args.settings_json or "{}"), cache)
    else:
        benchmark_wet(args.data_dir, repeats=args.repeats)


if __name__ == "__main__":
    main()
