"""MSRP (Microsoft Research Paraphrase Corpus) as Microsoft ships it: the files and their reader
(seed 001 Tables 5-6; the user's copy, ``eval.msrp_dir``)."""

from __future__ import annotations

import os
from pathlib import Path

from parasim.train.core.data import Split

MSRP_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}


def read_msrp(path: str | os.PathLike) -> Split:
    """One MSRP file: tab-separated ``Quality``, ``#1 ID``, ``#2 ID``, ``#1 String``, ``#2 String``
    under a header line (the layout Microsoft ships).

    Raises:
        ValueError: naming the file and line of a row that is not in this layout.
    """
    import csv

    p = Path(path)
    out = Split([], [], [], [], [])
    with p.open(encoding="utf-8-sig", newline="") as fh:
        rows = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        for n, row in enumerate(rows, 1):
            if n == 1 and row and row[0].strip().lower() == "quality":
                continue
            if not row or not "".join(row).strip():
                continue
            if len(row) != 5 or row[0].strip() not in ("0", "1"):
                raise ValueError(
                    f"{p}:{n}: not an MSRP row (5 tab-separated fields, Quality 0 or 1)"
                )
            out.s1.append(row[3])
            out.s2.append(row[4])
            out.label.append(int(row[0]))
            out.fold.append(None)
            out.lang_pair.append("en-en")
    if not out.label:
        raise ValueError(f"{p}: no MSRP rows")
    return out
