"""Tune a static model's token vectors on the Python documentation's translations (issue 35).

The variants of BENCHMARKS.md's table "Contrastive tuning of the static vectors": the workflow's
build (``align.static.tune``, :func:`parasim.models.static.tune_static`, whose ``extra`` files
and ``average_seeds`` the workflow has too) from an existing static folder, plus two one-off
options the workflow does not have: the pairs split into sentences
where both sides of a paragraph split into as many, and a blend of the tuned and untuned
vectors. Each output folder is an ``align.encoder`` for ``parasim bench align --encoder``::

    PYTHONPATH=src python scripts/tune_static.py --base <cache>/models/e5-static-fa0532a7e5bd \\
        --out build/st/fr-lr0.0005 --langs fr --learning-rate 5e-4 [--symmetric] [--sentences] \\
        [--blend 1.0 0.5] [--extra build/man-eq-defr.jsonl]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from parasim.bench.catalogues import DATA_DIR, translation_pairs
from parasim.models.static import TuneSpec, load_static, read_pair_file, tune_static

#: A sentence end followed by a capital (or an opening quote / Spanish mark).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÀ-ÝÉ«\"¿¡])")


def split_sentences(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each paragraph pair as its sentence pairs where both sides split into as many
    sentences (more than one), else as it is."""
    out: list[tuple[str, str]] = []
    for en, other in pairs:
        a, b = SENTENCE_END.split(en), SENTENCE_END.split(other)
        out += list(zip(a, b, strict=True)) if len(a) == len(b) > 1 else [(en, other)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="an untuned static model folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--langs", nargs="+", default=["fr"])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--symmetric", action="store_true")
    ap.add_argument("--sentences", action="store_true")
    ap.add_argument("--blend", type=float, nargs="+", default=[1.0])
    ap.add_argument("--data", default=str(DATA_DIR))
    ap.add_argument(
        "--extra", nargs="+", default=[],
        help="JSON lines of more pairs ({'a', 'b'}: scripts/man_pairs.py); with them the pairs "
        "are deduplicated and sorted",
    )  # fmt: skip
    a = ap.parse_args()

    from model2vec import StaticModel

    c0 = time.process_time()
    tune = TuneSpec(
        epochs=a.epochs, learning_rate=a.learning_rate, batch_size=a.batch_size, seed=a.seed,
        symmetric=a.symmetric,
    )  # fmt: skip
    model = load_static(a.base)
    # the catalogues' pairs, languages in sorted order (`parasim bench scale pairs`' file)
    pairs = [p for lang in sorted(set(a.langs)) for p in translation_pairs(lang, a.data)]
    if a.sentences:
        pairs = split_sentences(pairs)
    for path in a.extra:
        pairs += read_pair_file(path)
    if a.extra:
        pairs = sorted(set(pairs))
    vecs, figures = tune_static(model, pairs, tune)
    cpu = round(time.process_time() - c0, 1)
    base = np.asarray(model.embedding, dtype=np.float32)
    stamp0 = json.loads((Path(a.base) / "parasim_static.json").read_text(encoding="utf-8"))
    for b in a.blend:
        out = Path(a.out if len(a.blend) == 1 else f"{a.out}-b{b}")
        shutil.rmtree(out, ignore_errors=True)
        StaticModel(
            vectors=(b * vecs + (1 - b) * base).astype(np.float32), tokenizer=model.tokenizer,
            config=dict(model.config), normalize=True, base_model_name=model.base_model_name,
        ).save_pretrained(str(out))  # fmt: skip
        stamp = {
            **stamp0,
            "tune": {**asdict(tune), "pairs": "python-docs", "langs": a.langs, "data": a.data},
            "sentences": a.sentences,
            "extra": a.extra,
            "blend": b,
            "tuning": figures,
            "cpu_seconds": cpu,
        }
        (out / "parasim_static.json").write_text(json.dumps(stamp, indent=1) + "\n")
        print(out, figures, f"{cpu} CPU-s")


if __name__ == "__main__":
    main()
