"""Contextual word retrieval of encoders on Flores-200 and on the positives' test word pairs.

For every other language: the test slice of the word pairs (the corpus test split's page pairs)
and, when a Flores-200 devtest folder is given, the Flores EN-xx sentences word-aligned the same
way (spaCy words, eflomal intersection with the training sentences and any ``extra`` parallel
text adding statistics, one-to-one, exact matches removed). Each encoder is evaluated on each
set (:func:`parasim.train.eval.cwr.retrieval`: contextual and non-contextual, both directions,
unseen word pairs only, by part of speech); the first encoder also with the rotation baseline
(Procrustes on its vectors of the training word pairs).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from parasim.accel import resolve_device
from parasim.flores import CODES, flores_file, read_flores
from parasim.train.eval.cwr import ParallelSet

log = logging.getLogger("parasim.train")


def seen_types(sets: Mapping[str, ParallelSet]) -> dict[str, set[tuple[str, str]]]:
    """Per language, the lower-cased (English, other) word types of the training word pairs."""
    return {
        lang: {(s.en[k][i].lower(), s.other[k][j].lower())
               for k, lk in enumerate(s.links) for i, j in lk}
        for lang, s in sets.items()
    }  # fmt: skip


def tag_english(ps: ParallelSet, nlp=None) -> ParallelSet:
    """Fill ``en_pos`` with spaCy's UPOS tags of the given English words (kept as they are)."""
    from spacy.tokens import Doc

    if nlp is None:
        from parasim.divergences.tags import load_spacy

        nlp = load_spacy("en")
    if nlp.meta.get("parasim_blank"):
        ps.en_pos = None
        return ps
    docs = nlp.pipe([Doc(nlp.vocab, words=w) for w in ps.en], batch_size=256)
    ps.en_pos = [[t.pos_ for t in d] for d in docs]
    return ps


def reference_set(
    en_texts: Sequence[str], other_texts: Sequence[str], lang: str,
    extra: tuple[Sequence[Sequence[str]], Sequence[Sequence[str]]] = ((), ()),
    seed: int = 13, samplers: int = 3, nlps: Mapping[str, Any] | None = None,
) -> tuple[ParallelSet, dict]:  # fmt: skip
    """A tagged :class:`ParallelSet` of a reference parallel text (Flores): spaCy words, eflomal
    intersection links (``extra`` sentence pairs add statistics), the same one-to-one and
    exact-match filters as the training word pairs."""
    from collections import Counter

    from parasim.divergences.tags import load_spacy
    from parasim.divergences.wordalign import align_intersection

    from .wordpairs import one_to_one, tokenize

    nlps = dict(nlps or {})
    nlp_en = nlps.get("en") or load_spacy("en")
    nlp_o = nlps.get(lang) or load_spacy(lang)
    en, other = tokenize(nlp_en, en_texts), tokenize(nlp_o, other_texts)
    links = align_intersection(en, other, extra[0], extra[1], n_samplers=samplers, seed=seed)
    counts: Counter = Counter()
    kept = [one_to_one(lk, e, o, counts) for lk, e, o in zip(links, en, other, strict=True)]
    counts["word_pairs"] = sum(map(len, kept))
    counts["sentence_pairs"] = len(en)
    ps = tag_english(ParallelSet(en=en, other=other, links=kept, lang=lang), nlp_en)
    return ps, dict(counts)


def parse_extra(specs: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """``LANG:EN_FILE:OTHER_FILE`` specs -> {lang: [(en file, other file), ...]}."""
    out: dict[str, list[tuple[str, str]]] = {}
    for s in specs:
        parts = s.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"--extra: LANG:EN_FILE:OTHER_FILE, not {s!r}")
        out.setdefault(parts[0], []).append((parts[1], parts[2]))
    return out


@dataclasses.dataclass
class CwrSets:
    """The evaluation sets of :func:`prepare_cwr`, ready for :func:`score_cwr` (picklable: the
    spaCy and eflomal work can run on one machine and the encoders on another).

    Attributes:
        sets: ``{set name: (tagged ParallelSet, language, counts)}``.
        train: the training word pairs per language (the rotation baseline's data).
        seen: per language, the training word-pair types (left out of the scores).
    """

    sets: dict[str, tuple[Any, str, dict]]
    train: dict[str, Any]
    seen: dict[str, set]


def prepare_cwr(
    wordpairs: Sequence[str],
    flores: str | None = None,
    langs: Sequence[str] = ("fr", "es"),
    extra: Sequence[str] = (),
    max_test_pairs: int | None = 1000,
    seed: int = 13,
    max_flores: int | None = None,
) -> CwrSets:
    """The sets of :func:`evaluate_cwr`: the word pairs' test slice and the Flores sentences
    word-aligned and tagged (spaCy, eflomal; CPU only)."""
    from parasim.divergences.tags import load_spacy, tokens_only
    from parasim.divergences.wordalign import read_parallel

    from .data import parallel_sets
    from .wordpairs import read_word_pairs

    train = parallel_sets(read_word_pairs(wordpairs, "train"))
    test = parallel_sets(read_word_pairs(wordpairs, "test"), max_test_pairs, seed)
    extra_files = parse_extra(extra)
    nlps = {"en": load_spacy("en")}
    sets: dict[str, tuple[Any, str, dict]] = {}
    for lang in langs:
        nlps.setdefault(lang, load_spacy(lang))
        if lang in test and len(test[lang]):
            sets[f"positives-test-{lang}"] = (
                tag_english(test[lang], nlps["en"]), lang,
                {"sentence_pairs": len(test[lang]),
                 "word_pairs": sum(map(len, test[lang].links))},
            )  # fmt: skip
        if flores:
            if lang not in CODES or not all(
                flores_file(code, flores).is_file() for code in ("en", lang)
            ):
                log.warning("no Flores-200 %s files in %s: skipped", lang, flores)
                continue
            ex_en = list(train[lang].en) if lang in train else []
            ex_ot = list(train[lang].other) if lang in train else []
            for en_p, ot_p in extra_files.get(lang, []):
                e, o = read_parallel(en_p, ot_p)
                ex_en += tokens_only(nlps["en"], e)
                ex_ot += tokens_only(nlps[lang], o)
            ps, counts = reference_set(
                read_flores("en", flores, max_flores),
                read_flores(lang, flores, max_flores),
                lang,
                (ex_en, ex_ot),
                seed=seed,
                nlps=nlps,
            )
            counts["extra_sentence_pairs"] = len(ex_en)
            sets[f"flores-{lang}"] = (ps, lang, counts)
    return CwrSets(sets=sets, train=train, seen=seen_types(train))


def score_cwr(
    prepared: CwrSets,
    encoders: Sequence[str],
    rotation: bool = True,
    max_rotation_pairs: int = 10_000,
    device: str = "auto",
    dtype: str = "float32",
) -> dict[str, Any]:
    """CWR of each encoder on each set of ``prepared`` (on ``device``: CUDA when present for
    ``auto``); the rotation baseline for the first encoder. See :func:`evaluate_cwr`."""
    from parasim.models import load_encoder
    from parasim.train.eval.cwr import evaluate_encoder, rotation_baseline

    t0 = time.perf_counter()
    sets, train, seen = prepared.sets, prepared.train, prepared.seen
    out: dict[str, Any] = {
        "sets": {name: {"counts": c, "results": {}} for name, (_, _, c) in sets.items()},
        "train_word_pairs": {k: sum(map(len, s.links)) for k, s in train.items()},
    }
    for n, enc in enumerate(encoders):
        model, tok = load_encoder(enc, device, dtype, key="eval-align-encoder --encoders")
        rot = {}
        if rotation and n == 0:
            for lang in {lg for _, lg, _ in sets.values()}:
                if lang in train and len(train[lang]):
                    rot[lang] = rotation_baseline(model, tok, train[lang], max_rotation_pairs)
        for name, (ps, lang, _) in sets.items():
            res = out["sets"][name]["results"]
            res[enc] = evaluate_encoder(model, tok, ps, seen.get(lang, ()))
            log.info("%s %s: %s", name, enc, _brief(res[enc]))
            if lang in rot:
                res[f"{enc}+rotation"] = evaluate_encoder(
                    model, tok, ps, seen.get(lang, ()), rotation=rot[lang]
                )
                log.info("%s %s+rotation: %s", name, enc, _brief(res[f"{enc}+rotation"]))
        del model
    out["device"] = str(resolve_device(device, key="eval-align-encoder device"))
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def evaluate_cwr(
    wordpairs: Sequence[str],
    encoders: Sequence[str],
    flores: str | None = None,
    langs: Sequence[str] = ("fr", "es"),
    extra: Sequence[str] = (),
    rotation: bool = True,
    max_test_pairs: int | None = 1000,
    seed: int = 13,
    max_rotation_pairs: int = 10_000,
    max_flores: int | None = None,
    device: str = "auto",
) -> dict[str, Any]:
    """CWR of each encoder on each set; see the module docstring (:func:`prepare_cwr`, then
    :func:`score_cwr`).

    Returns:
        ``{"sets": {set: {"counts": ..., "results": {encoder: retrieval result}}}, ...}``; the
        rotation baseline appears as ``"<first encoder>+rotation"``. ``max_flores``: only the
        first that many Flores sentences (aligned and evaluated).
    """
    t0 = time.perf_counter()
    prepared = prepare_cwr(wordpairs, flores, langs, extra, max_test_pairs, seed, max_flores)
    out = score_cwr(prepared, encoders, rotation, max_rotation_pairs, device)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _brief(r: dict) -> str:
    c, nc = r["contextual"], r["non_contextual"]
    return (
        f"contextual {c['accuracy']} ({c['word_pairs']} pairs) "
        f"non-contextual {nc['accuracy']} ({nc['word_pairs']} pairs)"
    )
