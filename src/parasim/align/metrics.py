"""Alignment scores: strict and lax precision / recall / F1 against gold links.

The definition is the one behind published Text+Berg figures (vecalign's ``score.py``, after
Sennrich & Volk 2011), restated from ``shared/data/README.md``:

* strict: a predicted link is correct only when the exact ``(src ids, tgt ids)`` link is in gold;
* lax: a predicted link is correct when it shares at least one source-target sentence pair with
  a gold link;
* precision is taken over all predicted links, deletions (1-0, 0-1) included;
* recall is taken over the gold links that are not deletions, matched (with the same strict /
  lax rule, roles swapped) against the predicted links that are not deletions;
* counts are summed over all documents before dividing (micro average); F1 is the harmonic mean.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

Link = tuple[tuple[int, ...], tuple[int, ...]]


def parse_links(lines: Iterable[str], source: str = "<gold>") -> list[Link]:
    """Parse ``[src ids]:[tgt ids]`` lines (anything after a third ``:`` is ignored).

    Raises:
        ValueError: naming ``source`` and the line number of a malformed line.
    """
    out: list[Link] = []
    for no, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(":")]
        try:
            src, tgt = ast.literal_eval(fields[0]), ast.literal_eval(fields[1])
            out.append((tuple(int(x) for x in src), tuple(int(y) for y in tgt)))
        except (ValueError, SyntaxError, IndexError, TypeError) as err:
            raise ValueError(f"{source}:{no}: not a '[ids]:[ids]' link: {line!r}") from err
    return out


def read_links(path: str | Path) -> list[Link]:
    """Read a gold / test alignment file in the ``[src ids]:[tgt ids]`` format."""
    with open(path, encoding="utf-8") as fh:
        return parse_links(fh, str(path))


def format_links(links: Iterable[Link]) -> str:
    """The ``[src ids]:[tgt ids]`` text of ``links`` (one per line)."""
    return "".join(f"{list(s)}:{list(t)}\n" for s, t in links)


def _match_counts(gold: Iterable[Link], test: Iterable[Link]) -> tuple[int, int, int, int]:
    """(strict tp, strict fp, lax tp, lax fp) of ``test`` links judged against ``gold``."""
    gold_set = {(tuple(s), tuple(t)) for s, t in gold if s or t}
    test_set = {(tuple(s), tuple(t)) for s, t in test if s or t}
    gold_pairs: dict[int, set[int]] = defaultdict(set)
    for s, t in gold_set:
        for x in s:
            gold_pairs[x].update(t)
    tps = fps = tpl = fpl = 0
    for link in test_set:
        if link in gold_set:
            tps += 1
            tpl += 1
            continue
        fps += 1
        s, t = link
        if any(gold_pairs.get(x, set()).intersection(t) for x in s):
            tpl += 1
        else:
            fpl += 1
    return tps, fps, tpl, fpl


def score_alignments(
    gold_docs: Sequence[Sequence[Link]], test_docs: Sequence[Sequence[Link]]
) -> dict[str, float]:
    """Strict and lax precision, recall and F1, micro-averaged over documents.

    Args:
        gold_docs: gold links per document.
        test_docs: predicted links per document, same order.

    Returns:
        ``precision_strict, recall_strict, f1_strict, precision_lax, recall_lax, f1_lax`` and
        the counts ``n_test, n_gold``.
    """
    if len(gold_docs) != len(test_docs):
        raise ValueError(f"{len(gold_docs)} gold documents but {len(test_docs)} test documents")
    p = [0, 0, 0, 0]
    r = [0, 0, 0, 0]
    n_test = n_gold = 0
    for gold, test in zip(gold_docs, test_docs, strict=True):
        n_test += len(test)
        n_gold += len(gold)
        p = [x + y for x, y in zip(p, _match_counts(gold, test), strict=True)]
        test_nd = [(s, t) for s, t in test if s and t]
        gold_nd = [(s, t) for s, t in gold if s and t]
        r = [x + y for x, y in zip(r, _match_counts(test_nd, gold_nd), strict=True)]

    def div(a: int, b: int) -> float:
        return a / b if b else 0.0

    def f1(x: float, y: float) -> float:
        return 2 * x * y / (x + y) if x + y else 0.0

    ps, pl = div(p[0], p[0] + p[1]), div(p[2], p[2] + p[3])
    rs, rl = div(r[0], r[0] + r[1]), div(r[2], r[2] + r[3])
    return {
        "precision_strict": ps,
        "recall_strict": rs,
        "f1_strict": f1(ps, rs),
        "precision_lax": pl,
        "recall_lax": rl,
        "f1_lax": f1(pl, rl),
        "n_test": n_test,
        "n_gold": n_gold,
    }
