"""Contextual word retrieval of encoders on Flores-200 and on the positives' test word pairs.

For every other language: the test slice of the word pairs (the corpus test split's page pairs)
and, when a Flores-200 devtest folder is given, the Flores EN-xx sentences word-aligned the same
way (spaCy words, eflomal intersection with the training sentences and any ``extra`` parallel
text adding statistics, one-to-one, exact matches removed). Each encoder is evaluated on each
set (:func:`parasim.train.cwr.retrieval`: contextual and non-contextual, both directions, unseen
word pairs only, by part of speech); the first encoder also with the rotation baseline
(Procrustes on its vectors of the training word pairs).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("parasim.train")

FLORES_FILES = {"en": "eng_Latn.devtest", "fr": "fra_Latn.devtest", "es": "spa_Latn.devtest"}


def _lines(path: str | os.PathLike) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def parse_extra(specs: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """``LANG:EN_FILE:OTHER_FILE`` specs -> {lang: [(en file, other file), ...]}."""
    out: dict[str, list[tuple[str, str]]] = {}
    for s in specs:
        parts = s.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"--extra: LANG:EN_FILE:OTHER_FILE, not {s!r}")
        out.setdefault(parts[0], []).append((parts[1], parts[2]))
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
) -> dict[str, Any]:
    """CWR of each encoder on each set; see the module docstring.

    Returns:
        ``{"sets": {set: {"counts": ..., "results": {encoder: retrieval result}}}, ...}``; the
        rotation baseline appears as ``"<first encoder>+rotation"``. ``max_flores``: only the
        first that many Flores sentences (aligned and evaluated).
    """
    from parasim.divergences.tags import load_spacy, tokens_only
    from parasim.divergences.wordalign import read_parallel
    from parasim.models import load_encoder

    from .align_encoder import parallel_sets, reference_set, seen_types, tag_english
    from .cwr import evaluate_encoder, rotation_baseline
    from .wordpairs import read_word_pairs

    t0 = time.perf_counter()
    train = parallel_sets(read_word_pairs(wordpairs, "train"))
    test = parallel_sets(read_word_pairs(wordpairs, "test"), max_test_pairs, seed)
    seen = seen_types(train)
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
            en_f, ot_f = Path(flores, FLORES_FILES["en"]), Path(flores, FLORES_FILES.get(lang, ""))
            if not (en_f.is_file() and ot_f.is_file()):
                log.warning("no Flores-200 %s files in %s: skipped", lang, flores)
                continue
            ex_en = list(train[lang].en) if lang in train else []
            ex_ot = list(train[lang].other) if lang in train else []
            for en_p, ot_p in extra_files.get(lang, []):
                e, o = read_parallel(en_p, ot_p)
                ex_en += tokens_only(nlps["en"], e)
                ex_ot += tokens_only(nlps[lang], o)
            ps, counts = reference_set(
                _lines(en_f)[:max_flores],
                _lines(ot_f)[:max_flores],
                lang,
                (ex_en, ex_ot),
                seed=seed,
                nlps=nlps,
            )
            counts["extra_sentence_pairs"] = len(ex_en)
            sets[f"flores-{lang}"] = (ps, lang, counts)
    out: dict[str, Any] = {
        "sets": {name: {"counts": c, "results": {}} for name, (_, _, c) in sets.items()},
        "train_word_pairs": {k: sum(map(len, s.links)) for k, s in train.items()},
    }
    for n, enc in enumerate(encoders):
        model, tok = load_encoder(enc, "cpu", "float32", key="eval-cwr --encoders")
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
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _brief(r: dict) -> str:
    c, nc = r["contextual"], r["non_contextual"]
    return (
        f"contextual {c['accuracy']} ({c['word_pairs']} pairs) "
        f"non-contextual {nc['accuracy']} ({nc['word_pairs']} pairs)"
    )
