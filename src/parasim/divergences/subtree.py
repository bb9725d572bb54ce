"""Subtree deletion (seed 000 §3.2): content present on one side only.

Delete a randomly chosen dependency subtree of the English sentence that is not a leaf and covers
less than half of the sentence; the variant on the other side deletes the words aligned to such a
subtree instead. Tags: the words aligned to the deleted ones, on the side that kept them, are DIV.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from .tags import (
    Parsed,
    Variant,
    aligned_en,
    aligned_other,
    delete_indices,
    make_tags,
    spans_of,
)
from .wordalign import Links

TYPE = "subtree_deletion"
_CLOSE = {",", ".", ";", ":", ")", "!", "?"}


def subtree_spans(p: Parsed) -> list[tuple[int, int]]:
    """Half-open spans of subtrees that are not leaves, not the root and < half the sentence."""
    n = len(p)
    spans = set()
    if not p.has_parse:
        return []
    for i in range(n):
        if p.n_children[i] == 0 or p.heads[i] == i:
            continue
        s, e = p.left[i], p.right[i] + 1
        if e - s >= 2 and (e - s) * 2 < n:
            spans.add((s, e))
    return sorted(spans)


def _tidy(p: Parsed, s: int, e: int) -> tuple[int, int]:
    """Widen a deleted span by one comma so that no ', ,' or a leading ',' is left behind."""
    n = len(p)
    if s == 0 and e < n and p.tokens[e] in {",", ";", ":"}:
        return s, e + 1
    if s > 0 and p.tokens[s - 1] in {",", ";"} and (e == n or p.tokens[e] in _CLOSE):
        return s - 1, e
    return s, e


def _recase_first(tokens: list[str], p: Parsed, kept_first: int) -> None:
    # The old first word was capitalised and is gone: capitalise the new first word.
    if tokens and p.tokens[0][:1].isupper() and kept_first < len(p):
        tokens[0] = tokens[0][:1].upper() + tokens[0][1:]


def subtree_deletions(
    en: Parsed,
    other: Parsed,
    links: Links,
    rng: random.Random,
    sides: tuple[str, ...] = ("en", "other"),
    reasons: dict[str, int] | None = None,
) -> Iterator[Variant]:
    """Yield subtree-deletion variants in a seeded random order.

    Args:
        en: the parsed English sentence.
        other: the parsed other-language sentence.
        links: intersection alignment (en index, other index) of the seed pair.
        rng: seeded random generator (one per seed and type).
        sides: sides that may be edited; each variant picks one at random.
        reasons: counts why nothing (more) could be made, by reason; updated in place.

    Yields:
        :class:`Variant` objects; a subtree whose words have no alignment link is passed over,
        because no token on the other side could then be tagged DIV.
    """
    reasons = reasons if reasons is not None else {}
    spans = subtree_spans(en)
    if not spans:
        reasons["no_nonleaf_subtree" if en.has_parse else "no_parser"] = 1
        return
    rng.shuffle(spans)
    n_en, n_other = len(en), len(other)
    made = 0
    for s, e in spans:
        side = rng.choice(sides)
        for side_try in (side, *(x for x in sides if x != side)):
            v = None
            if side_try == "en":
                s2, e2 = _tidy(en, s, e)
                if (e2 - s2) * 2 >= n_en:
                    s2, e2 = s, e
                drop = set(range(s2, e2))
                div_other = aligned_other(links, drop)
                if not div_other:
                    continue
                toks, ws = delete_indices(en.tokens, en.ws, drop)
                if s2 == 0:
                    _recase_first(toks, en, e2)
                v = Variant(
                    type=TYPE,
                    side="en",
                    en_tokens=toks,
                    en_ws=ws,
                    other_tokens=list(other.tokens),
                    other_ws=list(other.ws),
                    en_tags=make_tags(len(toks), ()),
                    other_tags=make_tags(n_other, div_other),
                    src_spans=[(s2, e2)],
                    new_spans=[],
                )
            else:
                drop = aligned_other(links, range(s, e))
                if not drop or len(drop) * 2 >= n_other:
                    continue
                div_en = aligned_en(links, drop)
                toks, ws = delete_indices(other.tokens, other.ws, drop)
                if 0 in drop and toks and other.tokens[0][:1].isupper():
                    toks[0] = toks[0][:1].upper() + toks[0][1:]
                v = Variant(
                    type=TYPE,
                    side="other",
                    en_tokens=list(en.tokens),
                    en_ws=list(en.ws),
                    other_tokens=toks,
                    other_ws=ws,
                    en_tags=make_tags(n_en, div_en),
                    other_tags=make_tags(len(toks), ()),
                    src_spans=spans_of(drop),
                    new_spans=[],
                )
            made += 1
            yield v
            break
    if not made:
        reasons["no_alignment_links"] = 1
