"""Benchmark the translation backends on public parallel test sets: BLEU, chrF and lines/s.

Sets (from ``../shared/data/parallel``): Flores-200 devtest (1,012 sentences, fr->en and es->en)
and Tatoeba (1,000 pairs each, fr->en and es->en). Each set is translated twice through a fresh
cache: cold (every line goes to the backend) and again (every line should come from the cache).

    parasim bench translate                       # apertium
    parasim bench translate --backend marian --model '{"fr": "Helsinki-NLP/opus-mt-fr-en",
        "es": "Helsinki-NLP/opus-mt-es-en"}'
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parasim.accel import cpu_seconds
from parasim.flores import FOLDER as FLORES
from parasim.flores import flores_file
from parasim.paths import shared_data
from parasim.stats import Recorder
from parasim.translate.base import make_translator
from parasim.translate.cache import TranslationCache
from parasim.translate.stage import translate_texts

DEFAULT_DATA = shared_data("parallel")


@dataclass
class ParallelSet:
    """Source lines, their language and English references."""

    name: str
    lang: str
    src: list[str]
    ref: list[str]


def _read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def load_sets(data_dir: str | Path = DEFAULT_DATA, limit: int | None = None) -> list[ParallelSet]:
    """The test sets found under ``data_dir`` (missing ones are left out).

    Args:
        data_dir: The ``parallel`` folder (``flores200-devtest/``, ``tatoeba/``).
        limit: Keep only the first ``limit`` lines of each set.

    Raises:
        ValueError: A set's source and reference differ in line count.
    """
    data_dir = Path(data_dir)
    flores, tatoeba = data_dir / FLORES.name, data_dir / "tatoeba"
    spec = [
        ("flores200", "fr", flores_file("fr", flores), flores_file("en", flores)),
        ("flores200", "es", flores_file("es", flores), flores_file("en", flores)),
        ("tatoeba", "fr", tatoeba / "tatoeba.fra-eng.fra", tatoeba / "tatoeba.fra-eng.eng"),
        ("tatoeba", "es", tatoeba / "tatoeba.spa-eng.spa", tatoeba / "tatoeba.spa-eng.eng"),
    ]
    sets = []
    for name, lang, src, ref in spec:
        if not src.is_file() or not ref.is_file():
            continue
        s, r = _read(src), _read(ref)
        if len(s) != len(r):
            raise ValueError(f"{src}: {len(s)} lines, but {len(r)} in the reference")
        sets.append(ParallelSet(name, lang, s[:limit], r[:limit]))
    return sets


def score(hyp: list[str | None], ref: list[str]) -> dict[str, float]:
    """Corpus BLEU and chrF (sacrebleu defaults); an untranslated line scores as empty."""
    import sacrebleu

    hyp_ = [h or "" for h in hyp]
    return {
        "bleu": round(sacrebleu.corpus_bleu(hyp_, [ref]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyp_, [ref]).score, 2),
    }


def benchmark(
    cfg: dict[str, Any],
    sets: list[ParallelSet],
    log: logging.Logger | None = None,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Translate every set cold and again from the cache; return one result row per set.

    Args:
        cfg: A ``translate:`` config section (backend and its settings).
        sets: From :func:`load_sets`.
        log: Logger for the stage's own progress lines (default: quiet).
        threads: apertium processes / torch threads.

    Returns:
        Rows with set, lang, lines, backend, bleu, chrf, untranslated, cold_s,
        cold_lines_per_s, cold_cpu_s, cold_lines_per_cpu_s (load-independent), rerun_s,
        rerun_lines_per_s, rerun_translated (0 when the cache works), rerun_same_output.
    """
    log = log or logging.getLogger("parasim.bench.translate.quiet")
    backend = make_translator(cfg, threads)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for ps in sets:
                cache_file = Path(tmp) / f"{ps.name}-{ps.lang}.sqlite"
                st, st2 = Recorder("translate"), Recorder("translate")
                t0, c0 = time.perf_counter(), cpu_seconds()  # apertium's too
                with TranslationCache(cache_file) as cache:
                    hyp = translate_texts(ps.src, ps.lang, backend, cache, log, rec=st)
                cold, cold_cpu = time.perf_counter() - t0, cpu_seconds() - c0
                t0 = time.perf_counter()
                with TranslationCache(cache_file) as cache:  # a new instance: read from disk
                    hyp2 = translate_texts(ps.src, ps.lang, backend, cache, log, rec=st2)
                rerun = time.perf_counter() - t0
                rows.append(
                    {
                        "set": ps.name,
                        "lang": f"{ps.lang}-en",
                        "lines": len(ps.src),
                        "backend": backend.label(ps.lang),
                        **score(hyp, ps.ref),
                        "untranslated": st.counted("untranslated"),
                        "cold_s": round(cold, 2),
                        "cold_lines_per_s": round(len(ps.src) / cold, 1),
                        # Wall time depends on what else runs; CPU time much less so.
                        "cold_cpu_s": round(cold_cpu, 2),
                        "cold_lines_per_cpu_s": round(len(ps.src) / max(cold_cpu, 1e-9), 1),
                        "rerun_s": round(rerun, 3),
                        "rerun_lines_per_s": round(len(ps.src) / rerun, 1),
                        "rerun_translated": st2.counted("translated"),
                        "rerun_same_output": hyp2 == hyp,
                    }
                )
    finally:
        backend.close()
    return rows


def _print_table(rows: list[dict[str, Any]]) -> None:
    cols = ["set", "lang", "lines", "backend", "bleu", "chrf", "untranslated", "cold_s",
            "cold_lines_per_s", "cold_lines_per_cpu_s", "rerun_lines_per_s",
            "rerun_translated"]  # fmt: skip
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in cols))


def main(argv: list[str] | None = None) -> int:
    """Command line: print a table (or JSON) of BLEU, chrF and lines/s per test set."""
    ap = argparse.ArgumentParser(prog="parasim bench translate", description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="apertium")
    ap.add_argument("--model", help='marian: a name/path, or JSON {"fr": ..., "es": ...}')
    ap.add_argument("--device", default="auto")
    ap.add_argument("--num-beams", type=int, default=1)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--threads", type=int, default=1, help="apertium processes / torch threads")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the parallel/ folder")
    ap.add_argument("--limit", type=int, help="first N lines of each set")
    ap.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    ap.add_argument("-v", "--verbose", action="store_true", help="log the stage's progress")
    args = ap.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    model = args.model
    if model and model.lstrip().startswith("{"):
        model = json.loads(model)
    cfg = {
        "backend": args.backend,
        "model": model,
        "device": args.device,
        "num_beams": args.num_beams,
        "batch_size": args.batch_size,
    }
    sets = load_sets(args.data, args.limit)
    if not sets:
        print(f"no test sets under {args.data}", file=sys.stderr)
        return 2
    log = logging.getLogger("parasim.translate") if args.verbose else None
    rows = benchmark(cfg, sets, log, threads=args.threads)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        _print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
