"""Phrase replacement (seed 000 §3.2, after Pham et al. 2018): phrasal edits and mistranslations.

A random span of one side is replaced by a span from another sentence of the corpus with the
same part-of-speech sequence, so the result stays as grammatical as possible. English spans are
keyed by PTB tags; French/Spanish spans by UPOS plus number and gender. Spans are connected
pieces of the dependency tree, which keeps most replacements grammatical.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence

from .tags import (
    CONTENT_POS,
    Parsed,
    Variant,
    aligned_en,
    aligned_other,
    make_tags,
)
from .wordalign import Links

TYPE = "phrase_replacement"
_BAD_POS = frozenset({"PUNCT", "SYM", "SPACE", "X", ""})


def eligible_spans(p: Parsed, min_len: int, max_len: int) -> list[tuple[int, int]]:
    """Phrase spans of ``min_len``..``max_len`` tokens that can be swapped cleanly.

    A span holds a content word and no punctuation, is one connected piece of the dependency
    tree (exactly one of its tokens has its head outside), and is delimited by whitespace or
    punctuation (no French elision like ``l'`` glued to a neighbour).
    """
    if not p.has_parse:
        return []
    n = len(p)
    out = []
    for s in range(n):
        if s > 0 and p.ws[s - 1] == "":
            continue
        for length in range(min_len, max_len + 1):
            e = s + length
            if e > n:
                break
            window = p.pos[s:e]
            if any(x in _BAD_POS for x in window):
                break  # longer spans from s contain the same bad token
            if p.ws[e - 1] == "" and e < n and p.pos[e] != "PUNCT":
                continue
            if p.tokens[e - 1].endswith(("'", "\u2019")):
                continue
            if not any(x in CONTENT_POS for x in window):
                continue
            if len(_heads(p, s, e)) == 1:
                out.append((s, e))
    return out


def _heads(p: Parsed, s: int, e: int) -> list[int]:
    return [i for i in range(s, e) if not s <= p.heads[i] < e or p.heads[i] == i]


def span_key(p: Parsed, s: int, e: int) -> tuple[str, ...]:
    """Tag sequence of ``p[s:e]`` plus the dependency label of its head: a replacement must fill
    the same slot of the sentence (an object for an object), not only match the tags."""
    return (*p.tag[s:e], p.dep[_heads(p, s, e)[0]] if p.dep else "")


class PhraseIndex:
    """Spans of a corpus keyed by their tag sequence.

    Args:
        parses: parsed sentences of one language.
        ids: an id per sentence (recorded as the phrase's provenance).
        min_len: shortest span, in tokens.
        max_len: longest span, in tokens.
    """

    def __init__(
        self, parses: Sequence[Parsed], ids: Sequence[str], min_len: int = 2, max_len: int = 4
    ) -> None:
        self.parses = parses
        self.ids = ids
        self.min_len, self.max_len = min_len, max_len
        self.index: dict[tuple[str, ...], list[tuple[int, int]]] = defaultdict(list)
        for k, p in enumerate(parses):
            for s, e in eligible_spans(p, min_len, max_len):
                self.index[span_key(p, s, e)].append((k, s))

    def find(
        self, seed_id: str, p: Parsed, s: int, e: int, rng: random.Random, tries: int = 16
    ) -> tuple[int, int] | None:
        """A random (sentence, start) with the same tags as ``p[s:e]`` and different words.

        The sentence of ``seed_id`` itself is never the source.
        """
        pool = self.index.get(span_key(p, s, e))
        if not pool:
            return None
        old = [t.lower() for t in p.tokens[s:e]]
        for _ in range(min(tries, len(pool))):
            k2, s2 = pool[rng.randrange(len(pool))]
            if self.ids[k2] == seed_id:
                continue
            new = [t.lower() for t in self.parses[k2].tokens[s2 : s2 + (e - s)]]
            if new != old:
                return k2, s2
        return None


def _replace(p: Parsed, s: int, e: int, src: Parsed, s2: int) -> tuple[list[str], list[str]]:
    n = e - s
    new = list(src.tokens[s2 : s2 + n])
    new_ws = list(src.ws[s2 : s2 + n])
    new_ws[-1] = p.ws[e - 1]
    # Sentence-initial capitals belong to the position, not the word (proper nouns keep theirs).
    if s2 == 0 and src.pos[s2] != "PROPN" and new[0] != "I":
        new[0] = new[0][:1].lower() + new[0][1:]
    if s == 0 and p.tokens[0][:1].isupper():
        new[0] = new[0][:1].upper() + new[0][1:]
    return (
        list(p.tokens[:s]) + new + list(p.tokens[e:]),
        list(p.ws[:s]) + new_ws + list(p.ws[e:]),
    )


def phrase_replacements(
    seed_id: str,
    en: Parsed,
    other: Parsed,
    links: Links,
    rng: random.Random,
    en_index: PhraseIndex,
    other_index: PhraseIndex | None,
    sides: tuple[str, ...] = ("en", "other"),
    reasons: dict[str, int] | None = None,
) -> Iterator[Variant]:
    """Yield phrase-replacement variants of seed ``k`` in a seeded random order.

    Args:
        seed_id: id of this seed (its own sentences are never a source).
        en: parsed English sentence.
        other: parsed other-language sentence.
        links: intersection alignment of the seed pair.
        rng: seeded random generator.
        en_index: phrase index over the English sentences.
        other_index: phrase index over the other-language sentences (None: English side only).
        sides: sides that may be edited.
        reasons: counts why nothing (more) could be made; updated in place.
    """
    reasons = reasons if reasons is not None else {}
    indexes = {"en": (en, en_index), "other": (other, other_index)}
    spans = {
        side: eligible_spans(p, idx.min_len, idx.max_len) if idx is not None else []
        for side, (p, idx) in indexes.items()
        if side in sides
    }
    if not any(spans.values()):
        no_pos = all(not indexes[x][0].has_parse or indexes[x][1] is None for x in spans)
        reasons["no_pos_tags" if no_pos else "no_phrase_span"] = 1
        return
    for side in spans:
        rng.shuffle(spans[side])
    made = 0
    pos = {side: 0 for side in spans}
    while any(pos[x] < len(spans[x]) for x in spans):
        side = rng.choice([x for x in spans if pos[x] < len(spans[x])])
        s, e = spans[side][pos[side]]
        pos[side] += 1
        p, idx = indexes[side]
        hit = idx.find(seed_id, p, s, e, rng)
        if hit is None:
            continue
        k2, s2 = hit
        toks, ws = _replace(p, s, e, idx.parses[k2], s2)
        new_span = [(s, e)]
        if side == "en":
            v = Variant(
                type=TYPE,
                side="en",
                en_tokens=toks,
                en_ws=ws,
                other_tokens=list(other.tokens),
                other_ws=list(other.ws),
                en_tags=make_tags(len(toks), range(s, e)),
                other_tags=make_tags(len(other), aligned_other(links, range(s, e))),
                src_spans=[(s, e)],
                new_spans=new_span,
                source_id=idx.ids[k2],
            )
        else:
            v = Variant(
                type=TYPE,
                side="other",
                en_tokens=list(en.tokens),
                en_ws=list(en.ws),
                other_tokens=toks,
                other_ws=ws,
                en_tags=make_tags(len(en), aligned_en(links, range(s, e))),
                other_tags=make_tags(len(toks), range(s, e)),
                src_spans=[(s, e)],
                new_spans=new_span,
                source_id=idx.ids[k2],
            )
        made += 1
        yield v
    if not made:
        reasons["no_pos_matching_span"] = 1
