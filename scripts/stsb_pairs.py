"""English–French / English–Spanish sentence pairs from the STS benchmark's dev split (issue 35).

``../shared/data/sts/stsb-multi-mt`` holds the STSb dev sentences in English and in their French
and Spanish (machine) translations, row for row. Each distinct (English, translation) sentence
is written as one JSON line ``{"lang_a": "en", "lang_b": ..., "a": ..., "b": ...}``: the format of
``align.static.tune.extra`` (captions, news and forum sentences, to tune the static aligner's
vectors on text unlike the technical catalogues)::

    PYTHONPATH=src python scripts/stsb_pairs.py --sts ../shared/data/sts/stsb-multi-mt \\
        --lang fr --out build/stsb-enfr.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


def stsb_pairs(folder: Path, lang: str) -> list[tuple[str, str]]:
    """The distinct (English, ``lang``) sentence pairs of the dev split, in file order (equal
    sides left out)."""
    files = [folder / f"stsb-{x}-dev.csv" for x in ("en", lang)]
    for f in files:
        if not f.is_file():
            sys.exit(f"stsb_pairs: {f} is not there (../shared/data/sts/stsb-multi-mt)")
    with files[0].open(encoding="utf-8") as fe, files[1].open(encoding="utf-8") as fo:
        en, other = list(csv.reader(fe)), list(csv.reader(fo))
    if len(en) != len(other):
        sys.exit(f"stsb_pairs: {files[0]} and {files[1]} differ in rows ({len(en)}, {len(other)})")
    seen: set[tuple[str, str]] = set()
    out = []
    for a, b in zip(en, other, strict=True):
        for i in (0, 1):
            p = (a[i], b[i])
            if p[0] != p[1] and p not in seen:
                seen.add(p)
                out.append(p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sts", type=Path, default=Path("../shared/data/sts/stsb-multi-mt"))
    ap.add_argument("--lang", default="fr", choices=["fr", "es"])
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    pairs = stsb_pairs(a.sts, a.lang)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("w", encoding="utf-8") as f:
        for en, other in pairs:
            row = {"lang_a": "en", "lang_b": a.lang, "a": en, "b": other}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{a.out}: {len(pairs)} pairs")


if __name__ == "__main__":
    main()
