"""Validity checks on synthetic divergences, recomputed from what each row stores.

Each check returns the names of the rules a variant breaks (empty: valid):

- ``text_tokens``: the text is the tokens joined (spaces aside).
- ``tags_length``: one tag per token on both sides.
- ``has_div`` / ``all_eq``: a divergent variant carries a DIV tag; an equivalent row none.
- ``edit_confined``: outside the recorded edit the tokens equal the seed's.
- ``tags_agree``: DIV = inserted tokens on the edited side, and the words aligned (seed links) to
  the removed/replaced tokens on the other side.
- ``deletion_lt_half`` / ``deletion_not_leaf``: a deleted span is under half the sentence and,
  on the English side, more than one token.
- ``pos_match``: re-tagging the variant gives the replaced span's coarse POS sequence
  (``retokenized`` when spaCy splits the variant differently).
- ``wordnet_relation``: the substitute is a hypernym/hyponym of a sense of the original word.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tags import DIV, Parsed, aligned_en, aligned_other

CHECKS = (
    "text_tokens",
    "tags_length",
    "has_div",
    "all_eq",
    "edit_confined",
    "tags_agree",
    "deletion_lt_half",
    "deletion_not_leaf",
    "pos_match",
    "retokenized",
    "wordnet_relation",
)


def _div(tags: Sequence[str]) -> set[int]:
    return {i for i, t in enumerate(tags) if t == DIV}


def _idx(spans: Sequence[tuple[int, int]]) -> set[int]:
    return {i for s, e in spans for i in range(s, e)}


def _pairs(spans) -> list[tuple[int, int]]:
    # Rows hold spans as {"start", "end"} dicts (Arrow structs); accept plain pairs too.
    return [(x["start"], x["end"]) if isinstance(x, dict) else tuple(x) for x in spans]


def _same_tokens(a: Sequence[str], b: Sequence[str]) -> bool:
    # The first word may be re-capitalised after an edit at the sentence start.
    if len(a) != len(b):
        return False
    if a and a[0].lower() != b[0].lower():
        return False
    return list(a[1:]) == list(b[1:])


def check_row(
    row: dict,
    seed_en: Sequence[str],
    seed_other: Sequence[str],
    links: set[tuple[int, int]],
    lexicon=None,
) -> list[str]:
    """Structural and lexical checks of one row against its seed (see the module docstring).

    Args:
        row: a row of the divergences table (dict with its columns; spans as (start, end) pairs).
        seed_en: the seed's English tokens.
        seed_other: the seed's other-language tokens.
        links: the seed's intersection alignment.
        lexicon: a :class:`~parasim.divergences.lexical.WordNetLexicon` (None: skip WordNet check).
    """
    bad = []
    for side in ("en", "other"):
        toks, text = row[f"{side}_tokens"], row[f"{side}_text"]
        if "".join(toks) != "".join(text.split()):
            bad.append("text_tokens")
        if len(row[f"{side}_tags"]) != len(toks):
            bad.append("tags_length")
    if bad:
        return sorted(set(bad))
    div_en, div_other = _div(row["en_tags"]), _div(row["other_tags"])
    if row["type"] == "equivalent":
        if div_en or div_other:
            bad.append("all_eq")
        if list(row["en_tokens"]) != list(seed_en) or list(row["other_tokens"]) != list(seed_other):
            bad.append("edit_confined")
        return bad
    if not (div_en or div_other):
        bad.append("has_div")
    side = row["side"]
    src = _pairs(row["src_spans"])
    new = _pairs(row["new_spans"])
    seed_edit = seed_en if side == "en" else seed_other
    seed_keep = seed_other if side == "en" else seed_en
    toks_edit = row[f"{side}_tokens"]
    toks_keep = row["other_tokens" if side == "en" else "en_tokens"]
    removed = _idx(src)
    if list(toks_keep) != list(seed_keep):
        bad.append("edit_confined")
    if new:
        (s, e), (s2, e2) = src[0], new[0]
        expect_len = len(seed_edit) - (e - s) + (e2 - s2)
        ok = (
            len(src) == 1
            and len(new) == 1
            and s == s2
            and len(toks_edit) == expect_len
            and _same_tokens(toks_edit[:s], seed_edit[:s])
            and list(toks_edit[e2:]) == list(seed_edit[e:])
        )
    else:
        kept = [t for i, t in enumerate(seed_edit) if i not in removed]
        ok = _same_tokens(toks_edit, kept)
    if not ok:
        bad.append("edit_confined")
    div_edit, div_keep = (div_en, div_other) if side == "en" else (div_other, div_en)
    expect_keep = aligned_other(links, removed) if side == "en" else aligned_en(links, removed)
    if div_edit != _idx(new) or div_keep != expect_keep:
        bad.append("tags_agree")
    if row["type"] == "subtree_deletion":
        if len(removed) * 2 >= len(seed_edit):
            bad.append("deletion_lt_half")
        if side == "en" and len(removed) < 2:
            bad.append("deletion_not_leaf")
    if row["type"] == "lexical_substitution" and lexicon is not None:
        pos = "v" if (row.get("wn_synset") or "").split(".")[-2:-1] == ["v"] else "n"
        if not lexicon.is_related(row["orig_word"], row["new_word"], row["wn_relation"], pos):
            bad.append("wordnet_relation")
    return bad


def check_pos(rows: Sequence[dict], seed_parses: Sequence[Parsed], reparsed: Sequence[Parsed]):
    """``pos_match`` / ``retokenized`` failures of phrase replacements, one list per row.

    Args:
        rows: phrase-replacement rows.
        seed_parses: the parse of each row's edited seed sentence.
        reparsed: spaCy's parse of each row's edited variant sentence.
    """
    out = []
    for row, seed, var in zip(rows, seed_parses, reparsed, strict=True):
        toks = row["en_tokens"] if row["side"] == "en" else row["other_tokens"]
        if list(var.tokens) != list(toks):
            out.append(["retokenized"])
            continue
        (s, e), (s2, e2) = _pairs(row["src_spans"])[0], _pairs(row["new_spans"])[0]
        out.append([] if list(seed.pos[s:e]) == list(var.pos[s2:e2]) else ["pos_match"])
    return out


def summarize(failures: Sequence[tuple[str, list[str]]]) -> dict:
    """Counts per type: rows, rows passing every check, and failures per check."""
    out: dict[str, dict] = {}
    for typ, bad in failures:
        d = out.setdefault(typ, {"rows": 0, "valid": 0, "failed": {}})
        d["rows"] += 1
        d["valid"] += not bad
        for b in bad:
            d["failed"][b] = d["failed"].get(b, 0) + 1
    for d in out.values():
        d["valid_share"] = round(d["valid"] / d["rows"], 4) if d["rows"] else None
    return out
