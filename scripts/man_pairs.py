"""Paragraph pairs from Debian's translated man pages, for tuning the static vectors (issue 35).

Debian's ``manpages-de``, ``manpages-fr`` and ``manpages-es`` (manpages-l10n) translate the
English man pages of the packages installed beside them (``manpages`` and the rest). Each
translated page is rendered with ``man`` and paired with its English page, paragraph by
paragraph:

* ``--method equal`` (the seed's rule): only pages whose two renderings have as many paragraphs,
  paragraph i with paragraph i (translations of another version of the page differ in count and
  are left out);
* ``--method dp``: every page, aligned by parasim's DP with the static scorer (``--encoder``,
  vectors centred per language over all pages), 1:1 links only, kept at a centred cosine of at
  least ``--min-cos``.

Both sides must hold 3-80 words, mostly letters, and differ. ``--pivot de fr`` also writes the
German-French pairs of paragraphs whose English side both languages translate (the Text+Berg
gold set is German-French: without them the German token rows never move). Output: JSON lines
``{"lang_a", "lang_b", "a", "b", "page"}``. The pages, hence the pairs, depend on the packages
installed (run here on Debian 12: manpages-l10n 4.18.1, man-db 2.11.2)::

    apt-get install manpages manpages-de manpages-fr manpages-es
    PYTHONPATH=src python scripts/man_pairs.py --langs de fr --pivot de fr --out build/man-eq.jsonl
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

MAN = Path("/usr/share/man")


def paragraphs(path: str, limit: int | None = None) -> list[str]:
    """The paragraphs of a man page as ``man`` renders it (very wide, no overstrike), each on
    one line with its whitespace collapsed; the first ``limit`` (None: all)."""
    env = dict(os.environ, MANWIDTH="1000", LANG="C.UTF-8")
    try:
        out = subprocess.run(
            ["man", "-l", "-E", "UTF-8", path], capture_output=True, env=env, timeout=30
        ).stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        print(f"man timed out on {path}: left out", file=sys.stderr)
        return []
    out = re.sub(r".\x08", "", out)
    return [" ".join(b.split()) for b in re.split(r"\n\s*\n", out) if b.strip()][:limit]


def usable(text: str) -> bool:
    """3-80 words, at least 60 % of the non-space characters letters."""
    n = len(text.split())
    return 3 <= n <= 80 and sum(c.isalpha() for c in text) >= 0.6 * len(text.replace(" ", ""))


def page_pairs(lang: str) -> list[tuple[str, str, str]]:
    """(translated page, its English page, relative name) for every translated page of ``lang``
    whose English page is installed."""
    out = []
    for f in sorted(glob.glob(str(MAN / lang / "man*" / "*"))):
        rel = f.split(f"/man/{lang}/", 1)[1]
        if (MAN / rel).exists():
            out.append((f, str(MAN / rel), rel))
    return out


def mine(lang: str, method: str, encoder: str, min_cos: float) -> list[dict]:
    """The (English, ``lang``) paragraph pairs of the man pages (see the module docstring)."""
    jobs = page_pairs(lang)
    limit = None if method == "equal" else 400  # the DP's cost grows with a page's length
    with ThreadPoolExecutor(8) as ex:
        docs = list(
            ex.map(lambda j: (j[2], paragraphs(j[1], limit), paragraphs(j[0], limit)), jobs)
        )
    docs = [d for d in docs if d[1] and d[2]]
    pairs = []
    if method == "equal":
        for rel, en, other in docs:
            if len(en) == len(other):
                pairs += [
                    (e, o, rel)
                    for e, o in zip(en, other, strict=True)
                    if usable(e) and usable(o) and e != o
                ]
    else:
        from parasim.align import dp, scoring
        from parasim.align.stage import dp_params

        enc = scoring.cached_encoder(encoder)
        params = dp_params()
        centers = (
            scoring.language_mean([t for d in docs for t in d[1]], enc),
            scoring.language_mean([t for d in docs for t in d[2]], enc),
        )
        k = params.max_side
        for rel, en, other in docs:
            sc = scoring.EmbeddingScorer.from_lines(
                en, other, enc, k, k, max_overlap=3, centers=centers
            )
            lengths = (
                np.array([len(x) for x in en], float),
                np.array([len(x) for x in other], float),
            )
            for a, b in dp.align(sc, params, lengths).links:
                e, o = (en[a[0]], other[b[0]]) if len(a) == len(b) == 1 else ("", "")
                if usable(e) and usable(o) and e != o:
                    pairs.append((e, o, rel))
        if pairs:
            ev = enc([p[0] for p in pairs]) - centers[0]
            ov = enc([p[1] for p in pairs]) - centers[1]
            cos = (ev * ov).sum(1) / np.linalg.norm(ev, axis=1) / np.linalg.norm(ov, axis=1)
            pairs = [p for p, c in zip(pairs, cos, strict=True) if c >= min_cos]
    print(f"{lang}: {len(jobs)} pages with an English page, {len(docs)} rendered, "
          f"{len(pairs)} pairs ({method})", file=sys.stderr)  # fmt: skip
    return [{"lang_a": "en", "lang_b": lang, "a": e, "b": o, "page": rel} for e, o, rel in pairs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--langs", nargs="+", default=["de", "fr"])
    ap.add_argument("--method", choices=("equal", "dp"), default="equal")
    ap.add_argument("--encoder", default="e5-static", help="--method dp: the aligner's encoder")
    ap.add_argument("--min-cos", type=float, default=0.15, help="--method dp: centred cosine")
    ap.add_argument("--pivot", nargs=2, metavar=("A", "B"), help="also A-B pairs through English")
    ap.add_argument("--only-pivot", action="store_true", help="write the pivot pairs only")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if shutil.which("man") is None:
        raise SystemExit("man is not installed (apt-get install man-db)")
    for lang in a.langs:
        if not page_pairs(lang):
            raise SystemExit(
                f"no {lang} man page with its English page under {MAN}: "
                f"apt-get install manpages manpages-{lang}"
            )
    rows = {lang: mine(lang, a.method, a.encoder, a.min_cos) for lang in a.langs}
    out = [] if a.only_pivot else [r for lang in a.langs for r in rows[lang]]
    if a.pivot:
        x, y = a.pivot
        by_english = {r["a"]: r["b"] for r in rows[y]}  # an English paragraph's last translation
        piv = [
            {"lang_a": x, "lang_b": y, "a": r["b"], "b": by_english[r["a"]], "page": r["page"]}
            for r in rows[x]
            if r["a"] in by_english
        ]
        print(f"{x}-{y}: {len(piv)} pairs through English", file=sys.stderr)
        out += piv
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
