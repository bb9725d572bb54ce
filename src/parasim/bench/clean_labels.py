"""The clean stage on a hand-labelled sample: kept-set precision, recall of real translations.

    parasim bench clean_labels draw --results results --sites wet-boew demo-gov demo-insure \\
        --n 400 --floor 15 --seed 33 --out eval/clean_labels/labels.tsv
    parasim bench clean_labels score --results results --labels eval/clean_labels/labels.tsv

The pool is every aligned pair the clean stage saw on the given sites of a finished run: its kept
rows (``results/positives/<site>/``) and its dropped rows with their reason
(``results/dropped/<site>/``). A *unit* is a distinct pair: its English URL, other URL, English
text and other text (the ``key``, a sha1 of the four joined by a tab, which does not depend on
the code version's row ids); a unit's *decision* is ``kept`` when one of its rows was kept, else
the reason of most of its rows.

``draw`` takes a stratified random sample of units, a stratum per (site, decision): ``--n``
allocated in proportion to the strata's sizes, at least ``--floor`` from each stratum (all of it
when smaller), drawn with ``random.Random(seed)`` from the stratum's keys in sorted order. It
writes the sample as a TSV to label by hand (``eval/clean_labels/RULES.md``) and, beside it,
``strata.tsv`` (``<stem>-strata.tsv`` for another name than ``labels.tsv``): each stratum's size
in the pool and the number drawn (the weights). ``--kept K`` draws ``K`` kept units and
``--n`` dropped ones (a fixed kept / dropped split, as issue 51's 200 / 100).

``score`` joins a run's decisions to the labels by key (the run may be another code version's:
the labels keep their strata and weights from the run they were drawn from) and prints, as JSON:

- ``precision``: the share of the kept units that are real translations;
- ``recall``: the share of the real translations that are kept; a unit dropped as ``duplicate``
  or ``furniture`` counts as kept (its pair is kept once elsewhere); a labelled unit the run did
  not align (``absent``: its page pair left out, or aligned otherwise) counts as lost;
- ``recall_held``: the same, but a real translation whose unit is not kept is also saved when a
  kept (or kept-elsewhere) unit of the same page pair *holds* it: on each side one text contains
  the other (whitespace normalised) and the shorter is at least half the longer. A run aligned
  otherwise than the one the labels were drawn from ("For video, …" labelled, "Overview For
  video, …" kept) then keeps the translation it holds; with one code version both figures are
  equal but for the units the run itself drops while keeping a nesting neighbour;
- both per language pair, stratum-weighted (each labelled unit weighs its stratum's size over the
  labelled units of its stratum), with two 95 % intervals: a stratified bootstrap (units
  resampled within each stratum: ``*_ci95``) and Wilson's at Kish's effective sample size
  (``*_wilson_eff_ci95``), which stays informative where every labelled unit agrees (a share
  of 1.0 gives a bootstrap interval of [1.0, 1.0]);
- ``by_decision``: per decision of the run (kept, each reason, absent), the labelled units, how
  many are real translations, the share with its 95 % Wilson interval (unweighted: within one
  stratum of the draw every unit weighs the same) and the weighted estimate of the real
  translations behind that decision in the pool.

``unsure`` labels are left out (their stratum's weight goes to the other labelled units);
``--exclude SUB`` leaves out the units of a sub-reason (e.g. ``same_form``: identical sides
that are right translations) from every figure.

A settings change (two finished runs of the same sites, ``--base`` before and ``--results``
after) is judged on what it changed::

    parasim bench clean_labels changes draw --base RUN1/results --results RUN2/results \
        --sites wet-boew --n 60 --seed 34 --out eval/clean_labels/min_words.tsv
    parasim bench clean_labels changes score --labels eval/clean_labels/min_words.tsv

``changes draw`` finds the units kept after and not before (``gained``: not kept, nor dropped as
a duplicate of a kept one, by the base run) and those kept before and not after (``lost``), draws
``--n`` of each at random (``random.Random(seed)`` for gained, ``seed + 1`` for lost, from the
sorted keys) and writes them to label, with ``<out stem>-strata.tsv`` beside them (the sizes);
``changes score`` prints the share of real translations in each, with Wilson's 95 % interval,
the real translations and the noise each holds in all (share × size, the interval's bounds
likewise) and the change's net: real translations gained minus lost, noise gained minus lost.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow.parquet as pq

from parasim.bench.stats_util import wilson

__all__ = [
    "allocate", "changed_units", "draw", "draw_changes", "held_units", "load_labels", "pool",
    "score", "score_changes", "unit_key", "wilson",
]  # fmt: skip

#: Decisions whose pair is kept (once, elsewhere) for recall.
KEPT_ELSEWHERE = ("duplicate", "furniture")
#: The labels' columns, in file order.
COLUMNS = (
    "key",
    "site",
    "lang_pair",
    "stratum",
    "label",
    "sub_reason",
    "en_text",
    "other_text",
    "en_url",
    "other_url",
    "en_idx",
    "other_idx",
    "note",
)
LABELS = ("translation", "not_translation", "unsure")
_READ = ["site", "lang_pair", "en_url", "other_url", "en_idx", "other_idx", "en_text", "other_text"]


def unit_key(en_url: str, other_url: str, en_text: str, other_text: str) -> str:
    """The stable identity of an aligned pair: sha1 of its two URLs and two texts."""
    raw = "\t".join((en_url or "", other_url or "", en_text or "", other_text or ""))
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()


def pool(results: Path, sites: Sequence[str] | None = None) -> dict[str, dict]:
    """Every unit the clean stage saw on ``sites`` (all sites with positives when None).

    Returns key -> the unit's first row (the ``_READ`` columns) with ``decision`` and ``rows``.
    """
    results = Path(results)
    if not sites:
        sites = sorted(p.name for p in (results / "positives").iterdir() if p.is_dir())
    decisions: dict[str, Counter] = defaultdict(Counter)
    first: dict[str, dict] = {}
    for site in sites:
        shards = [("kept", p) for p in sorted((results / "positives" / site).glob("*.parquet"))]
        shards += [("dropped", p) for p in sorted((results / "dropped" / site).glob("*.parquet"))]
        if not shards:
            raise SystemExit(f"no positives or dropped shards for {site} in {results}")
        for kind, path in shards:
            cols = _READ + (["reason"] if kind == "dropped" else [])
            for r in pq.read_table(path, columns=cols).to_pylist():
                k = unit_key(r["en_url"], r["other_url"], r["en_text"], r["other_text"])
                decisions[k]["kept" if kind == "kept" else r["reason"]] += 1
                first.setdefault(k, r)
    out = {}
    for k, c in decisions.items():
        decision = "kept" if c["kept"] else sorted(c.items(), key=lambda x: (-x[1], x[0]))[0][0]
        row = {c_: first[k][c_] for c_ in _READ}
        out[k] = {**row, "decision": decision, "rows": sum(c.values())}
    return out


def allocate(sizes: dict, n: int, floor: int) -> dict:
    """Units to draw per stratum: ``n`` in proportion to ``sizes``, at least ``floor`` each (all
    of a smaller stratum), never more than the stratum holds."""
    total = sum(sizes.values())
    return {
        h: min(size, max(floor, math.ceil(n * size / total))) for h, size in sorted(sizes.items())
    }


def draw(
    units: dict[str, dict], n: int, floor: int, seed: int, kept: int | None = None
) -> tuple[list[dict], list[dict]]:
    """A stratified random sample of ``units``: the drawn rows and the strata (sizes, drawn).

    With ``kept``, the kept strata get ``kept`` units between them (in proportion to their
    sizes, no floor) and the dropped strata share ``n`` (with the floor); without it all strata
    share ``n``.
    """
    by_stratum: dict[tuple[str, str], list[str]] = defaultdict(list)
    for k, u in units.items():
        by_stratum[(u["site"], u["decision"])].append(k)
    sizes = {h: len(ks) for h, ks in by_stratum.items()}
    if kept is None:
        alloc = allocate(sizes, n, floor)
    else:
        kept_sizes = {h: s for h, s in sizes.items() if h[1] == "kept"}
        other = {h: s for h, s in sizes.items() if h[1] != "kept"}
        alloc = {**allocate(other, n, floor), **allocate(kept_sizes, kept, 0)}
    rng = random.Random(seed)
    rows, strata = [], []
    for h in sorted(by_stratum):
        keys = rng.sample(sorted(by_stratum[h]), alloc[h])
        strata.append(
            {"site": h[0], "stratum": h[1], "pool": len(by_stratum[h]), "drawn": len(keys)}
        )
        for k in keys:
            u = units[k]
            rows.append({**u, "key": k, "stratum": u["decision"], "label": "", "sub_reason": ""})
    return rows, strata


def _cell(x) -> str:
    if isinstance(x, list):
        return ",".join(map(str, x))
    return " ".join(str(x if x is not None else "").split("\t")).replace("\n", " ")


def write_tsv(path: Path, rows: Iterable[dict], columns: Sequence[str], header: str = "") -> None:
    """Rows as a TSV (tabs and newlines in cells become spaces), ``header`` as # comments."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        for line in header.splitlines():
            fh.write(f"# {line}".rstrip() + "\n")
        w = csv.writer(
            fh,
            delimiter="\t",
            lineterminator="\n",
            quoting=csv.QUOTE_NONE,
            quotechar=None,
            escapechar="\\",
        )
        w.writerow(columns)
        for r in rows:
            w.writerow([_cell(r.get(c, "")) for c in columns])


def read_tsv(path: Path) -> list[dict]:
    """The rows of a TSV written by :func:`write_tsv` (``#`` lines skipped)."""
    with open(path, encoding="utf-8") as fh:
        lines = (x for x in fh if not x.startswith("#"))
        return list(
            csv.DictReader(
                lines, delimiter="\t", quoting=csv.QUOTE_NONE, quotechar=None, escapechar="\\"
            )
        )


def strata_path(labels: Path, drawing: bool = False) -> Path:
    """The strata file of a sample: ``strata.tsv`` beside ``labels.tsv``, else
    ``<stem>-strata.tsv`` (so that several samples share a folder). Reading, a sample without
    its own file falls back to ``strata.tsv`` (an older draw wrote that name for any stem)."""
    own = labels.with_name(labels.stem + "-strata.tsv")
    if labels.stem != "labels" and (drawing or own.exists()):
        return own
    return labels.with_name("strata.tsv")


def load_labels(labels: Path, strata: Path | None = None) -> tuple[list[dict], dict]:
    """The labelled rows and the strata sizes ((site, stratum) -> pool size)."""
    rows = read_tsv(labels)
    bad = [r["key"] for r in rows if r["label"] not in LABELS]
    if bad:
        raise SystemExit(f"{labels}: {len(bad)} row(s) without a label in {LABELS}: {bad[:3]}")
    strata = Path(strata) if strata else strata_path(Path(labels))
    sizes = {(s["site"], s["stratum"]): int(s["pool"]) for s in read_tsv(strata)}
    missing = {(r["site"], r["stratum"]) for r in rows} - set(sizes)
    if missing:
        raise SystemExit(f"{strata}: no size for strata {sorted(missing)}")
    return rows, sizes


def _ratios(units: list[dict]) -> dict[str, float | None]:
    """Weighted precision, recall and held recall of ``units`` (each with weight, real, kept,
    kept_else, held)."""
    kept = sum(u["w"] for u in units if u["kept"])
    kept_real = sum(u["w"] for u in units if u["kept"] and u["real"])
    real = sum(u["w"] for u in units if u["real"])
    real_kept = sum(u["w"] for u in units if u["real"] and (u["kept"] or u["kept_else"]))
    real_held = sum(
        u["w"] for u in units if u["real"] and (u["kept"] or u["kept_else"] or u["held"])
    )
    return {
        "precision": kept_real / kept if kept else None,
        "recall": real_kept / real if real else None,
        "recall_held": real_held / real if real else None,
    }


def _nests(a: str | None, b: str | None) -> bool:
    """One text contains the other (whitespace normalised), the shorter at least half the
    longer."""
    a, b = " ".join((a or "").split()), " ".join((b or "").split())
    if not a or not b:
        return False
    short, long_ = sorted((a, b), key=len)
    return short in long_ and 2 * len(short) >= len(long_)


def held_units(rows: Iterable[dict], run: dict[str, dict]) -> set[str]:
    """Keys of the labelled ``rows`` not saved by their own unit in ``run`` (not kept nor kept
    elsewhere) that a saved unit of the same page pair holds (:func:`_nests` on both sides)."""
    saved = ("kept", *KEPT_ELSEWHERE)
    pages: dict[tuple, list[dict]] = defaultdict(list)
    for u in run.values():
        if u["decision"] in saved:
            pages[(u["en_url"], u["other_url"])].append(u)
    out = set()
    for r in rows:
        if r["key"] in run and run[r["key"]]["decision"] in saved:
            continue
        if any(
            _nests(r["en_text"], u["en_text"]) and _nests(r["other_text"], u["other_text"])
            for u in pages.get((r["en_url"], r["other_url"]), ())
        ):
            out.add(r["key"])
    return out


def _wilson_eff(units: list[dict], hit: str) -> tuple[float, float] | None:
    """Wilson interval of the weighted share of ``units`` with ``hit``, at Kish's effective
    sample size (sum of weights squared over the sum of squared weights)."""
    total = sum(u["w"] for u in units)
    if not total:
        return None
    n_eff = total**2 / sum(u["w"] ** 2 for u in units)
    share = sum(u["w"] for u in units if u[hit]) / total
    return wilson(share * n_eff, n_eff)


def _bootstrap(units: list[dict], reps: int, seed: int) -> dict[str, tuple | None]:
    """95 % percentile intervals of :func:`_ratios`, resampling units within their stratum."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for u in units:
        by[u["h"]].append(u)
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {"precision": [], "recall": [], "recall_held": []}
    for _ in range(reps):
        sample = []
        for members in by.values():
            sample.extend(rng.choices(members, k=len(members)))
        for name, value in _ratios(sample).items():
            if value is not None:
                draws[name].append(value)
    out = {}
    for name, values in draws.items():
        values.sort()
        out[name] = (
            (
                round(values[int(0.025 * len(values))], 4),
                round(values[int(0.975 * len(values)) - 1], 4),
            )
            if len(values) >= 20
            else None
        )
    return out


def score(
    results: Path,
    labels: Path,
    strata: Path | None = None,
    exclude: Sequence[str] = (),
    reps: int = 2000,
    seed: int = 0,
) -> dict:
    """A run's clean decisions against the labels: see the module docstring."""
    rows, sizes = load_labels(labels, strata)
    sites = sorted({r["site"] for r in rows})
    run = pool(results, sites)
    usable = [r for r in rows if r["label"] != "unsure" and r["sub_reason"] not in exclude]
    per_stratum = Counter((r["site"], r["stratum"]) for r in rows if r["label"] != "unsure")
    held = held_units(usable, run)
    units = []
    for r in usable:
        h = (r["site"], r["stratum"])
        decision = run[r["key"]]["decision"] if r["key"] in run else "absent"
        units.append(
            {
                "h": h,
                "w": sizes[h] / per_stratum[h],
                "lang_pair": r["lang_pair"],
                "real": r["label"] == "translation",
                "decision": decision,
                "kept": decision == "kept",
                "kept_else": decision in KEPT_ELSEWHERE,
                "held": r["key"] in held,
                "sub_reason": r["sub_reason"],
                "en_text": r["en_text"],
                "other_text": r["other_text"],
            }
        )

    def figures(group: list[dict], salt: int) -> dict:
        point = _ratios(group)
        ci = _bootstrap(group, reps, seed + salt)
        kept = [u for u in group if u["kept"]]
        real = [
            {
                **u,
                "saved": u["kept"] or u["kept_else"],
                "saved_held": u["kept"] or u["kept_else"] or u["held"],
            }
            for u in group
            if u["real"]
        ]
        return {
            "precision": None if point["precision"] is None else round(point["precision"], 4),
            "precision_ci95": ci["precision"],
            "precision_wilson_eff_ci95": _wilson_eff(kept, "real"),
            "kept_labelled": len(kept),
            "kept_real": sum(u["real"] for u in kept),
            "recall": None if point["recall"] is None else round(point["recall"], 4),
            "recall_ci95": ci["recall"],
            "recall_wilson_eff_ci95": _wilson_eff(real, "saved"),
            "real_labelled": len(real),
            "real_kept": sum(u["saved"] for u in real),
            "recall_held": None if point["recall_held"] is None else round(point["recall_held"], 4),
            "recall_held_ci95": ci["recall_held"],
            "recall_held_wilson_eff_ci95": _wilson_eff(real, "saved_held"),
            "real_held": sum(u["held"] for u in real),
            "real_in_pool_estimate": round(sum(u["w"] for u in real)),
        }

    out: dict = {
        "labels": str(labels),
        "results": str(results),
        "labelled": len(rows),
        "unsure": sum(r["label"] == "unsure" for r in rows),
        "excluded": {s: sum(r["sub_reason"] == s for r in rows) for s in exclude},
        "absent_from_run": sum(u["decision"] == "absent" for u in units),
        "all": figures(units, 0),
        "by_lang_pair": {
            lp: figures([u for u in units if u["lang_pair"] == lp], i + 1)
            for i, lp in enumerate(sorted({u["lang_pair"] for u in units}))
        },
    }
    by_decision = {}
    counts = Counter(u["decision"] for u in run.values())
    for d in sorted({u["decision"] for u in units}, key=lambda x: (x != "kept", x)):
        group = [u for u in units if u["decision"] == d]
        k = sum(u["real"] for u in group)
        by_decision[d] = {
            "pool": counts.get(d, 0),
            "labelled": len(group),
            "real": k,
            "real_share": round(k / len(group), 4),
            "real_share_ci95": wilson(k, len(group)),
            "real_in_pool_estimate": round(sum(u["w"] for u in group if u["real"])),
            "real_held": sum(u["real"] and u["held"] for u in group),
            "by_lang_pair": {
                lp: [
                    sum(u["real"] for u in group if u["lang_pair"] == lp),
                    sum(u["lang_pair"] == lp for u in group),
                ]
                for lp in sorted({u["lang_pair"] for u in group})
            },
        }
    out["by_decision"] = by_decision
    out["sub_reasons"] = {
        f"{lab}/{sub}": n
        for (lab, sub), n in sorted(Counter((r["label"], r["sub_reason"]) for r in rows).items())
    }
    return out | _examples(units)


def _examples(units: list[dict]) -> dict[str, list[tuple]]:
    """Up to 15 labelled units of each kind :func:`score` shows: real translations held, real
    ones lost, kept ones that are not real."""
    return {
        "real_held_examples": [
            (u["decision"], u["sub_reason"], u["en_text"][:70], u["other_text"][:70])
            for u in units
            if u["real"] and u["held"]
        ][:15],
        "real_lost_examples": [
            (u["decision"], u["sub_reason"], u["en_text"][:70], u["other_text"][:70])
            for u in units
            if u["real"] and not (u["kept"] or u["kept_else"])
        ][:15],
        "kept_not_real_examples": [
            (u["sub_reason"], u["en_text"][:70], u["other_text"][:70])
            for u in units
            if u["kept"] and not u["real"]
        ][:15],
    }


def changed_units(base: dict[str, dict], after: dict[str, dict]) -> tuple[list[str], list[str]]:
    """The keys kept after and not before (``gained``), and kept before and not after (``lost``);
    a unit dropped as a duplicate of a kept one counts as kept."""

    def kept(units: dict[str, dict], elsewhere: bool) -> set[str]:
        ok = ("kept", *KEPT_ELSEWHERE) if elsewhere else ("kept",)
        return {k for k, u in units.items() if u["decision"] in ok}

    gained = sorted(kept(after, False) - kept(base, True))
    lost = sorted(kept(base, False) - kept(after, True))
    return gained, lost


def draw_changes(
    base: dict[str, dict], after: dict[str, dict], n: int, seed: int
) -> tuple[list[dict], list[dict]]:
    """``n`` gained and ``n`` lost units at random (:func:`changed_units`): rows, strata."""
    rows, strata = [], []
    changed = zip(("gained", "lost"), changed_units(base, after), strict=True)
    for k_seed, (stratum, keys) in enumerate(changed):
        units = after if stratum == "gained" else base
        drawn = random.Random(seed + k_seed).sample(keys, min(n, len(keys)))
        for site in sorted({units[k]["site"] for k in keys}):
            strata.append(
                {"site": site, "stratum": stratum,
                 "pool": sum(units[k]["site"] == site for k in keys),
                 "drawn": sum(units[k]["site"] == site for k in drawn)}
            )  # fmt: skip
        for k in drawn:
            rows.append({**units[k], "key": k, "stratum": stratum, "label": "", "sub_reason": ""})
    return rows, strata


def score_changes(labels: Path, strata: Path | None = None) -> dict:
    """The labelled gained and lost units of :func:`draw_changes`: shares, totals, the net."""
    labels = Path(labels)
    rows, sizes = load_labels(labels, strata or labels.with_name(labels.stem + "-strata.tsv"))
    out: dict = {"labels": str(labels), "unsure": sum(r["label"] == "unsure" for r in rows)}
    for stratum in ("gained", "lost"):
        rs = [r for r in rows if r["stratum"] == stratum and r["label"] != "unsure"]
        size = sum(n for (_, h), n in sizes.items() if h == stratum)
        k = sum(r["label"] == "translation" for r in rs)
        lo, hi = wilson(k, len(rs)) or (0.0, 1.0)
        out[stratum] = {
            "units": size,
            "labelled": len(rs),
            "real": k,
            "share_real": round(k / len(rs), 4) if rs else None,
            "share_real_ci95": [round(lo, 4), round(hi, 4)],
            "real_units": round(size * k / len(rs)) if rs else None,
            "real_units_ci95": [round(size * lo), round(size * hi)],
            "noise_units": round(size * (1 - k / len(rs))) if rs else None,
            "noise_units_ci95": [round(size * (1 - hi)), round(size * (1 - lo))],
            "sub_reasons": dict(Counter(f"{r['label']}/{r['sub_reason']}" for r in rs)),
        }
    g, lo_ = out["gained"], out["lost"]
    if g["labelled"] and lo_["labelled"]:
        out["net"] = {
            "real": g["real_units"] - lo_["real_units"],
            "real_range": [
                g["real_units_ci95"][0] - lo_["real_units_ci95"][1],
                g["real_units_ci95"][1] - lo_["real_units_ci95"][0],
            ],
            "noise": g["noise_units"] - lo_["noise_units"],
            "noise_range": [
                g["noise_units_ci95"][0] - lo_["noise_units_ci95"][1],
                g["noise_units_ci95"][1] - lo_["noise_units_ci95"][0],
            ],
        }
    return out


def _write_draw(
    out: Path, strata_path: Path, rows: list[dict], strata: list[dict], command: str, **extra
) -> None:
    """A drawn sample to label and its strata, headed by the command that drew them."""
    header = (
        f"parasim bench clean_labels {command}\nlabels: translation | not_translation | unsure, "
        "with a sub_reason (eval/clean_labels/RULES.md)"
    )
    write_tsv(out, rows, COLUMNS, header)
    write_tsv(strata_path, strata, ("site", "stratum", "pool", "drawn"), header)
    print(json.dumps({**extra, "drawn": len(rows), "strata": strata}, indent=1))


def main(argv: list[str] | None = None) -> None:
    """``parasim bench clean_labels``: see the module docstring."""
    ap = argparse.ArgumentParser(
        prog="parasim bench clean_labels", description=__doc__.split("\n\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("draw", help="a stratified random sample of a run's aligned pairs to label")
    d.add_argument("--results", default="results")
    d.add_argument("--sites", nargs="+", required=True)
    d.add_argument("--n", type=int, default=400, help="units in all (before the floors)")
    d.add_argument("--floor", type=int, default=15, help="at least this many units a stratum")
    d.add_argument("--seed", type=int, default=33)
    d.add_argument(
        "--kept", type=int, help="units of the kept strata (then --n is the dropped strata's)"
    )
    d.add_argument(
        "--out",
        required=True,
        help="the TSV to label (its strata beside it: strata.tsv or <stem>-strata.tsv)",
    )
    s = sub.add_parser("score", help="a run's clean decisions against the labels")
    s.add_argument("--results", default="results")
    s.add_argument("--labels", required=True)
    s.add_argument("--strata", help="strata sizes (default: the draw's, beside the labels)")
    s.add_argument("--exclude", nargs="*", default=[], help="sub-reasons to leave out")
    s.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    s.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("changes", help="what a settings change gained and lost, to label")
    csub = c.add_subparsers(dest="step", required=True)
    cd = csub.add_parser("draw", help="gained and lost units of two runs, drawn to label")
    cd.add_argument("--base", required=True, help="the results folder before the change")
    cd.add_argument("--results", required=True, help="the results folder after it")
    cd.add_argument("--sites", nargs="+", required=True)
    cd.add_argument("--n", type=int, default=60, help="units drawn of each (gained, lost)")
    cd.add_argument("--seed", type=int, default=34)
    cd.add_argument("--out", required=True, help="the TSV to label (<stem>-strata.tsv beside it)")
    cs = csub.add_parser("score", help="shares of real translations gained and lost, the net")
    cs.add_argument("--labels", required=True)
    cs.add_argument("--strata", help="default: <labels stem>-strata.tsv beside the labels")
    args = ap.parse_args(argv)
    if args.cmd == "changes" and args.step == "draw":
        rows, strata = draw_changes(
            pool(Path(args.base), args.sites), pool(Path(args.results), args.sites),
            args.n, args.seed,
        )  # fmt: skip
        out = Path(args.out)
        command = f"changes draw --sites {' '.join(args.sites)} --n {args.n} --seed {args.seed}"
        _write_draw(out, out.with_name(out.stem + "-strata.tsv"), rows, strata, command)
    elif args.cmd == "changes":
        print(json.dumps(score_changes(Path(args.labels), args.strata), indent=1))
    elif args.cmd == "draw":
        units = pool(Path(args.results), args.sites)
        rows, strata = draw(units, args.n, args.floor, args.seed, args.kept)
        out = Path(args.out)
        kept = f" --kept {args.kept}" if args.kept is not None else ""
        _write_draw(out, strata_path(out, drawing=True), rows, strata,
                    f"draw --sites {' '.join(args.sites)} --n {args.n} --floor {args.floor} "
                    f"--seed {args.seed}{kept}", units=len(units))  # fmt: skip
    else:
        res = score(
            Path(args.results), Path(args.labels), args.strata, args.exclude, args.reps, args.seed
        )
        print(json.dumps(res, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
