"""Tests of the selection split (parasim.train.eval.select): the silver pairs, the rule that
picks a merge share, and the figures of a tiny random SentenceTransformer on a Flores-like
folder."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from parasim.train.eval.select import pick_share, silver_pairs

#: Flores-like lines: (English, French, Spanish).
FLORES = [
    ("The museum opens at nine.", "Le musée ouvre à neuf heures.", "El museo abre a las nueve."),
    ("The museum closes at six.", "Le musée ferme à six heures.", "El museo cierra a las seis."),
    ("A storm hit the coast.", "Une tempête a frappé la côte.", "Una tormenta azotó la costa."),
    ("The team won the final.", "L'équipe a gagné la finale.", "El equipo ganó la final."),
    ("Prices rose in March.", "Les prix ont augmenté en mars.", "Los precios subieron en marzo."),
    ("The bridge was rebuilt.", "Le pont a été reconstruit.", "El puente fue reconstruido."),
]  # fmt: skip


def write_flores(d: Path, rows=FLORES) -> Path:
    """``d/{eng,fra,spa}_Latn.devtest`` in Flores-200's format (one sentence a line)."""
    d.mkdir(parents=True, exist_ok=True)
    for k, code in enumerate(("eng_Latn", "fra_Latn", "spa_Latn")):
        (d / f"{code}.devtest").write_text("".join(r[k] + "\n" for r in rows), encoding="utf-8")
    return d


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_silver_pairs_are_the_nearest_and_some_random_others_never_the_sentence_itself():
    vecs = _unit(np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [-1, 0.05]], float))
    pairs = silver_pairs(vecs, near=1, far=2, seed=3)
    assert len(pairs) == 5 * 3 and len({tuple(p) for p in pairs}) == 15
    assert all(i != j for i, j in pairs)
    by_i = {i: {int(j) for a, j in pairs if a == i} for i in range(5)}
    assert 1 in by_i[0] and 0 in by_i[1] and 3 in by_i[2] and 2 in by_i[3]  # the nearest
    assert (silver_pairs(vecs, 1, 2, seed=3) == pairs).all()  # seeded
    assert len(silver_pairs(vecs, near=10, far=10)) == 5 * 4  # capped at the others
    with pytest.raises(ValueError, match="at least 2"):
        silver_pairs(vecs[:1])


def _figs(fr: float, es: float) -> dict:
    return {"silver_en_fr": fr, "silver_en_es": es, "hardness": {}}


def test_the_rule_takes_the_largest_share_that_keeps_both_languages():
    untrained = _figs(0.80, 0.82)
    figures = {
        0.5: _figs(0.81, 0.82),
        0.7: _figs(0.795, 0.815),  # falls 0.005 and 0.005: kept
        0.9: _figs(0.80, 0.805),  # EN-ES falls 0.015: not kept
        1.0: _figs(0.75, 0.70),
    }
    share, why = pick_share(figures, untrained)
    assert share == 0.7 and "largest" in why
    # a looser allowance keeps 0.9; a gap in the grid does not stop the search
    assert pick_share(figures, untrained, allowance=0.02)[0] == 0.9
    assert pick_share({0.5: _figs(0.5, 0.5), 0.8: _figs(0.8, 0.82)}, untrained)[0] == 0.8
    # none kept: the smallest share, and it says so
    share, why = pick_share({0.6: _figs(0.7, 0.7), 1.0: _figs(0.6, 0.6)}, untrained)
    assert share == 0.6 and "no share" in why
    with pytest.raises(ValueError, match="no share"):
        pick_share({}, untrained)
    with pytest.raises(ValueError, match="silver_en_es"):
        pick_share({1.0: {"silver_en_fr": 0.8}}, untrained)


def test_the_figures_of_a_model_on_a_flores_folder(tmp_path):
    pytest.importorskip("sentence_transformers")
    import torch
    from conftest import make_tiny_bert

    from parasim.train.core.contrastive import build_model
    from parasim.train.eval.select import measure_model, select_share, selection_split

    model = build_model(make_tiny_bert(tmp_path / "bert", chars=True), max_length=32)
    folder = write_flores(tmp_path / "flores")
    rows = [
        {"id": f"p{i}", "grade": "equivalent", "negative_kind": None, "sentence1": en,
         "sentence2": fr} for i, (en, fr, _) in enumerate(FLORES)
    ] + [
        {"id": "d0", "grade": "divergent", "negative_kind": "mined", "sentence1": FLORES[0][0],
         "sentence2": FLORES[1][1]},
    ]  # fmt: skip
    split = selection_split(model, folder, rows, near=2, far=1, sample=10, seed=0, batch_size=4)
    assert split.counts["silver_pairs"] == 6 * 3 and split.counts["flores_sentences"] == 6
    assert split.counts["test_rows_measured"]["mined"] == 1
    figs = measure_model(model, split, batch_size=4)
    assert -1 <= figs["silver_en_fr"] <= 1 and -1 <= figs["silver_en_es"] <= 1
    assert set(figs["hardness"]) == {"divergent", "mined"} and figs["hardness"]["mined"]["pairs"]
    # the start measured against itself falls by nothing: every share is kept, the largest wins
    rec = select_share(lambda: model, lambda s: model, split, [0.5, 1.0], batch_size=4)
    assert rec["share"] == 1.0 and rec["untrained"]["silver_en_fr"] == figs["silver_en_fr"]
    assert set(rec["shares"]) == {"0.5", "1"}
    # other weights: other figures
    other = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)
    assert measure_model(other, split, batch_size=4)["silver_en_fr"] != figs["silver_en_fr"]
    # Flores files that are not line-parallel: named
    (folder / "spa_Latn.devtest").write_text("Una línea.\n", encoding="utf-8")
    with pytest.raises(ValueError, match="es lines"):
        selection_split(model, folder, rows)
