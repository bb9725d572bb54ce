"""Throughput of the two model stages on real inputs, on whatever device is present (JSON out).

The two stages that run SmolLM2-135M are the slow ones of a CPU run: sentence vectors for hard
negatives (:mod:`parasim.negatives.vectors`) and the LM ranking of lexical substitutes
(:mod:`parasim.divergences.lexical`). This benchmark times exactly those calls, on a GPU machine
or on this one, so that the two can be compared on the same inputs:

    parasim bench models record --positives results/positives/wet-boew \\
        --out lm_calls.jsonl
    parasim bench models run --positives results/positives/wet-boew \\
        --lm-calls lm_calls.jsonl [--limit-sentences N] [--limit-calls N] [--save-vectors F.npy]

``record`` runs the divergences stage (lexical substitution only, no LM) over the positives and
writes every candidate list the LM is asked to rank, one JSON list per line. The lists do not
depend on the scorer (a variant is made whatever candidate wins), so the recorded calls are the
ones a run with SmolLM2 makes. It also prints how long the stage took without the LM.

``run`` loads the shipped encoder and scorer (``negatives.encoder`` defaults and
``divergences.lm: smollm2``, device and dtype ``auto``), encodes the distinct English sentences of
the positives, and ranks the recorded candidate lists; it prints sentences/s and variants/s (one
ranked list makes one variant). ``--compare-vectors F.npy`` reports the cosine between these
vectors and ones saved by another run (e.g. GPU bfloat16 against CPU float32).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

log = logging.getLogger("parasim.bench.models")


def _positives(folder: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(Path(folder).glob("*.parquet"))
    if not files:
        raise SystemExit(f"bench models: no .parquet files in {folder}")
    return pa.concat_tables(pq.read_table(f) for f in files)


def cmd_record(args: argparse.Namespace) -> dict:
    from parasim.divergences import LEXICAL, make_divergences
    from parasim.divergences.lexical import RecordingScorer

    table = _positives(args.positives)
    rec = RecordingScorer()
    t0 = time.perf_counter()
    from parasim.stats import Recorder

    stats = Recorder("divergences")
    make_divergences(table, stats, {"types": [LEXICAL], "lm": "none"}, scorer=rec)
    secs = time.perf_counter() - t0
    with open(args.out, "w", encoding="utf-8") as fh:
        for c in rec.calls:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    return {
        "positives": table.num_rows,
        "lm_calls": len(rec.calls),
        "candidates": sum(len(c) for c in rec.calls),
        "stage_seconds_without_lm": round(secs, 1),
        "stage_seconds": {k: round(v, 1) for k, v in stats.stats().seconds.items()},
    }


def _device_name() -> str:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({torch.get_num_threads()} threads)"


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def cmd_run(args: argparse.Namespace) -> dict:
    from parasim.divergences.lexical import best_index, load_scorer, prescore
    from parasim.negatives import vectors
    from parasim.negatives.vectors import EncoderConfig, encode, load_causal_lm

    out: dict = {"device": _device_name()}
    texts = sorted({t for t in _positives(args.positives).column("en_text").to_pylist() if t})
    if args.limit_sentences:
        texts = texts[: args.limit_sentences]
    for bs in args.batch_sizes:
        cfg = EncoderConfig.from_config({"batch_size": bs if bs else "auto"})
        t0 = time.perf_counter()
        load_causal_lm(cfg)
        load_s = time.perf_counter() - t0
        vectors._MEMO.clear()  # time the encoding, not the in-process memo
        encode(texts[: min(64, len(texts))], cfg)  # warm-up (CUDA context, kernels)
        vectors._MEMO.clear()
        _sync()
        t0 = time.perf_counter()
        vec = encode(texts, cfg)
        _sync()
        secs = time.perf_counter() - t0
        out[f"vectors_bs{bs or 'auto'}"] = {
            "sentences": len(texts),
            "seconds": round(secs, 2),
            "sentences_per_s": round(len(texts) / secs, 1),
            "model_load_s": round(load_s, 1),
        }
    if args.save_vectors:
        np.save(args.save_vectors, vec)
    if args.compare_vectors:
        ref = np.load(args.compare_vectors)
        n = min(len(ref), len(vec))
        a, b = vec[:n], ref[:n]
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
        out["vectors_vs_reference_cosine"] = {
            "n": int(n),
            "mean": round(float(cos.mean()), 5),
            "min": round(float(cos.min()), 5),
        }
    if args.lm_calls:
        lines = Path(args.lm_calls).read_text(encoding="utf-8").splitlines()
        calls = [json.loads(line) for line in lines if line]
        if args.limit_calls:
            calls = calls[: args.limit_calls]
        scorer = load_scorer("smollm2")
        for c in calls[:5]:
            scorer.score(c)  # warm-up
        base = {"scorer": scorer.name, "variants": len(calls)}
        base["candidates"] = sum(len(c) for c in calls)
        _sync()
        t0 = time.perf_counter()
        head = calls[: args.per_word_limit] if args.per_word_limit else calls
        per_call = [scorer.score(c) for c in head]
        _sync()
        secs = time.perf_counter() - t0
        out["lexical_ranking_per_word"] = {
            **base,
            "variants": len(head),
            "candidates": sum(len(c) for c in head),
            "seconds": round(secs, 2),
            "variants_per_s": round(len(head) / secs, 1),
        }
        for mt in args.max_tokens:
            scorer.score_many(calls[:20], max_tokens=mt)  # warm-up
            _sync()
            t0 = time.perf_counter()
            pre = prescore(scorer, calls, mt)  # what the stage does with lm_batch_tokens: mt
            many = [pre.score(c) for c in calls]
            _sync()
            secs = time.perf_counter() - t0
            pairs = list(zip(per_call, many[: len(per_call)], strict=True))
            same = sum(best_index(a) == best_index(b) for a, b in pairs)
            diff = max(abs(x - y) for a, b in pairs for x, y in zip(a, b, strict=True))
            out[f"lexical_ranking_batched_{mt}"] = {
                **base,
                "seconds": round(secs, 2),
                "variants_per_s": round(len(calls) / secs, 1),
                "same_choice_as_per_word": round(same / max(1, len(pairs)), 4),
                "max_abs_score_difference": round(diff, 4),
            }
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="parasim bench models", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record the LM ranking calls of the divergences stage")
    r.add_argument("--positives", required=True, help="folder of positives shards (.parquet)")
    r.add_argument("--out", required=True, help="JSON lines file to write")
    b = sub.add_parser("run", help="time sentence vectors and LM ranking on this device")
    b.add_argument("--positives", required=True, help="folder of positives shards (.parquet)")
    b.add_argument("--lm-calls", help="file written by `record` (omit: vectors only)")
    b.add_argument("--limit-sentences", type=int, default=0)
    b.add_argument("--limit-calls", type=int, default=0)
    b.add_argument("--per-word-limit", type=int, default=0, help="per-word ranking: first N")
    b.add_argument(
        "--batch-sizes", type=int, nargs="+", default=[32], help="vector batches (0: auto)"
    )
    b.add_argument(
        "--max-tokens", type=int, nargs="*", default=[8192], help="batched ranking: tokens a batch"
    )
    b.add_argument("--save-vectors", help="save the vectors of the last batch size (.npy)")
    b.add_argument("--compare-vectors", help="vectors saved by another run (.npy)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    res = cmd_record(args) if args.cmd == "record" else cmd_run(args)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
