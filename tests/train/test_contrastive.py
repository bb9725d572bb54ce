"""Tests of parasim.train.core.contrastive: the triples of both modes, a few training steps and
the resume after a crash, on a tiny random BERT and a hand-made corpus."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

from conftest import make_tiny_bert  # noqa: E402

FR, ES = "EN-FR-G", "EN-ES-G"


def _row(id_, s1, s2, grade, *, part=FR, split="train", pair="pp0", idx1=(0,), **kw) -> dict:
    lang = "en-fr" if part == FR else "en-es"
    return {
        "id": id_, "sentence1": s1, "sentence2": s2, "label": int(grade == "equivalent"),
        "lang_pair": lang, "partition": part, "domain": "government", "site": "toy",
        "source": {"equivalent": "aligned", "unrelated": "lda-negative"}.get(
            grade, "synthetic-divergence"),
        "pair_id": pair, "pair_id2": kw.pop("pair2", pair), "url1": f"http://toy/{pair}/en",
        "url2": f"http://toy/{pair}/{lang[3:]}", "idx1": list(idx1), "idx2": list(idx1),
        "split": split, "fold": 0 if split == "train" else None, "grade": grade, **kw,
    }  # fmt: skip


def _divergent(id_, parent: dict, side: str, edited: str, kind="synthetic") -> dict:
    s1, s2 = (edited, parent["sentence2"]) if side == "en" else (parent["sentence1"], edited)
    return _row(
        id_, s1, s2, "divergent", part=parent["partition"], split=parent["split"],
        pair=parent["pair_id"], idx1=parent["idx1"], negative_kind=kind, parent_id=parent["id"],
        diff_side=side,
    )  # fmt: skip


def _unrelated(id_, parent: dict, other: str) -> dict:
    return _row(
        id_, parent["sentence1"], other, "unrelated", part=parent["partition"],
        split=parent["split"], pair=parent["pair_id"], idx1=parent["idx1"], pair2="far",
        negative_kind="lda",
    )  # fmt: skip


#: English and French sentences of the toy corpus's positives.
SENTENCES = [
    ("The office opens at nine.", "Le bureau ouvre à neuf heures."),
    ("Apply before the first of May.", "Faites votre demande avant le premier mai."),
    ("The fee is twelve dollars.", "Les frais sont de douze dollars."),
    ("Bring two pieces of identification.", "Apportez deux pièces d'identité."),
    ("Forms are available online.", "Les formulaires sont disponibles en ligne."),
    ("Call us for more information.", "Appelez-nous pour plus de renseignements."),
    ("The park closes in winter.", "Le parc ferme en hiver."),
    ("Children under five ride free.", "Les enfants de moins de cinq ans voyagent gratuitement."),
    ("Parking is limited downtown.", "Le stationnement est limité au centre-ville."),
    ("Read the guide before you start.", "Lisez le guide avant de commencer."),
]


def corpus_rows() -> list[dict]:
    """The toy corpus: ten French positives in train (p0-p9), two in test, two Spanish ones.

    p0: two divergent rows (one of each side: a seeded choice); p1: an English-side edit (a
    flipped triple); p2: a mined line; p3: an unrelated row only (graded falls back to it);
    p4: no negative (left out); p5: a divergent and an unrelated row; p6-p9: unrelated rows
    only. Plus a divergent row whose parent is not in the corpus and an unrelated row that
    matches no positive, a Spanish partition and a test split.
    """
    pos = [
        _row(f"p{i}", en, fr, "equivalent", pair=f"pp{i // 2}", idx1=(i,), align_score=0.9)
        for i, (en, fr) in enumerate(SENTENCES)
    ]
    rows = list(pos)
    rows += [
        _divergent("d0o", pos[0], "other", "Le bureau ouvre à dix heures."),
        _divergent("d0e", pos[0], "en", "The office opens at ten."),
        _divergent("d1e", pos[1], "en", "Apply before the first of June."),
        _divergent("d2m", pos[2], "other", "Les frais sont de vingt dollars.", kind="mined"),
        _unrelated("u3", pos[3], "Le musée est fermé le lundi."),
        _divergent("d5o", pos[5], "other", "Écrivez-nous pour plus de renseignements."),
        _unrelated("u5", pos[5], "La bibliothèque prête des livres."),
        *(_unrelated(f"u{i}", pos[i], f"Une phrase sans rapport {i}.") for i in range(6, 10)),
        _divergent("dx", {**pos[6], "id": "gone"}, "other", "Une ligne orpheline."),
        _unrelated("ux", {**pos[6], "idx1": [99]}, "Une autre ligne sans positif."),
    ]  # fmt: skip
    test = [
        _row("t0", "Taxes are due in April.", "Les impôts sont dus en avril.", "equivalent",
             split="test", pair="tp0"),
        _row("t1", "The road is closed.", "La route est fermée.", "equivalent", split="test",
             pair="tp0", idx1=(1,)),
    ]  # fmt: skip
    rows += test + [_unrelated("tu0", test[0], "Le train part à midi.")]
    es = [
        _row("e0", "The office opens at nine.", "La oficina abre a las nueve.", "equivalent",
             part=ES, pair="pe0"),
        _row("e1", "The fee is twelve dollars.", "La tarifa es de doce dólares.", "equivalent",
             part=ES, pair="pe0", idx1=(1,)),
    ]  # fmt: skip
    return rows + es + [_unrelated("eu0", es[0], "El museo cierra los lunes.")]


def write_corpus(d: Path) -> Path:
    """The toy corpus as shards of parasim.io.CORPUS_SCHEMA (``d/data/<part>/<split>-*``)."""
    from collections import defaultdict

    import pyarrow as pa

    from parasim.io import CORPUS_SCHEMA, write_table

    by_file = defaultdict(list)
    for r in corpus_rows():
        by_file[(r["partition"], r["split"])].append(r)
    for (part, split), rows in by_file.items():
        table = pa.Table.from_pylist(rows, schema=CORPUS_SCHEMA)
        write_table(table, d / "data" / part / f"{split}-00000-of-00001.parquet")
    return d


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def char_bert(tmp_path_factory) -> str:
    return make_tiny_bert(tmp_path_factory.mktemp("char-bert"), chars=True)


def _by_anchor_or_positive(t) -> dict[str, tuple[str, str, str, str]]:
    """Each triple under the English sentence of its positive."""
    out = {}
    for a, p, n, s in zip(t.anchor, t.positive, t.negative, t.source, strict=True):
        english = p if s == "divergent_en" else a
        out[english] = (a, p, n, s)
    return out


def test_graded_triples_flip_the_english_edits_and_fall_back_to_unrelated(corpus):
    from parasim.train.core.contrastive import triples

    t = triples(corpus, [FR], grades="graded", seed=0)
    got = _by_anchor_or_positive(t)
    en = [e for e, _ in SENTENCES]
    fr = dict(SENTENCES)
    # p1's only divergent row edited the English side: anchor French, negative the edited English
    assert got[en[1]] == (fr[en[1]], en[1], "Apply before the first of June.", "divergent_en")
    assert got[en[2]] == (en[2], fr[en[2]], "Les frais sont de vingt dollars.", "divergent_other")
    assert got[en[3]] == (en[3], fr[en[3]], "Le musée est fermé le lundi.", "unrelated")
    assert got[en[5]][2:] == ("Écrivez-nous pour plus de renseignements.", "divergent_other")
    assert en[4] not in got  # no negative at all
    assert got[en[0]][2] in ("Le bureau ouvre à dix heures.", "The office opens at ten.")
    c = t.counts
    assert c["positives"] == 10 and c["triples"] == 9 and c["left_out_no_negative"] == 1
    assert c["positives"] == c["triples"] + c["left_out_no_negative"]
    assert c["triples"] == sum(c[f"negative_{s}"] for s in ("divergent_other", "divergent_en",
                                                          "unrelated"))  # fmt: skip
    assert c["negative_unrelated"] == 5  # p3 and p6-p9
    assert c["divergent_rows"] == 6 and c["divergent_unmatched"] == 1
    assert c["unrelated_rows"] == 7 and c["unrelated_unmatched"] == 1
    assert len(t.dataset()) == 9 and t.dataset().column_names == ["anchor", "positive", "negative"]


def test_the_choice_among_divergent_rows_is_seeded(corpus):
    from parasim.train.core.contrastive import triples

    picks = {triples(corpus, [FR], seed=s).source[0] for s in range(12)}
    assert picks == {"divergent_en", "divergent_other"}  # p0 has one of each: both get chosen
    assert triples(corpus, [FR], seed=3).negative == triples(corpus, [FR], seed=3).negative


def test_binary_triples_take_the_unrelated_rows_only(corpus):
    from parasim.train.core.contrastive import triples

    t = triples(corpus, [FR], grades="binary")
    assert set(t.source) == {"unrelated"}
    got = _by_anchor_or_positive(t)
    en = [e for e, _ in SENTENCES]
    assert sorted(got) == sorted([en[3], en[5], *en[6:]])
    assert got[en[5]][2] == "La bibliothèque prête des livres."
    assert t.counts["triples"] == 6 and t.counts["left_out_no_negative"] == 4
    test = triples(corpus, [FR], split="test", grades="binary")
    assert test.anchor == ["Taxes are due in April."] and test.counts["positives"] == 2
    both = triples(corpus, grades="binary")  # every partition
    assert both.partitions == [ES, FR] and both.counts["positives"] == 12
    assert "La oficina abre a las nueve." in both.positive


def test_triples_refuse_an_unknown_mode_and_a_missing_split(corpus, tmp_path):
    from parasim.train.core.contrastive import triples

    with pytest.raises(ValueError, match="grades"):
        triples(corpus, grades="ternary")
    with pytest.raises(ValueError, match="no train shard"):
        triples(tmp_path)


def test_a_few_steps_train_and_the_folder_loads(corpus, char_bert, tmp_path):
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from parasim.train.core.contrastive import MODEL_DIR, RUN_FILE, fit_contrastive, triples

    data = triples(corpus, [FR])
    res = fit_contrastive(
        char_bert, data, tmp_path / "run", steps=3, batch_size=4, learning_rate=1e-3, seed=0,
        max_length=32, save_steps=100, logging_steps=1, device="cpu", dtype="float32",
    )  # fmt: skip
    assert res.global_step == 3 and res.steps_run == 3 and res.resumed_from is None
    assert res.train_loss is not None and math.isfinite(res.train_loss)
    assert [s for s, _ in res.losses] == [1, 2, 3]
    assert len(res.step_seconds) == 3 and all(x > 0 for x in res.step_seconds)
    assert all(math.isfinite(loss) for _, loss in res.losses)
    assert res.model_dir == tmp_path / "run" / MODEL_DIR
    # the word embeddings are frozen: their rows are the base model's
    assert res.frozen_parameters == 32 * len(_vocab(char_bert))
    loaded = SentenceTransformer(str(res.model_dir), device="cpu")
    assert loaded.default_prompt_name == "query" and loaded.prompts["query"] == "query: "
    base = SentenceTransformer(char_bert, device="cpu")
    emb = loaded[0].auto_model.get_input_embeddings().weight
    assert np.allclose(emb.detach().numpy(), base[0].auto_model.get_input_embeddings()
                       .weight.detach().numpy())  # fmt: skip
    a, b = loaded.encode(["The office opens at nine.", "Le bureau ouvre à neuf heures."])
    assert a.shape == (32,) and np.isfinite(a).all() and not np.allclose(a, b)
    # encode prepends the prefix, as training did
    assert np.allclose(a, loaded.encode(["query: The office opens at nine."], prompt="")[0],
                       atol=1e-5)  # fmt: skip
    card = (res.model_dir / "README.md").read_text()
    assert "MultipleNegativesRankingLoss" in card and "graded" in card
    record = json.loads((res.model_dir / RUN_FILE).read_text())
    assert record["data"]["triples"] == 9 and record["result"]["global_step"] == 3


def _vocab(model_dir: str) -> list[str]:
    from transformers import AutoTokenizer

    return list(AutoTokenizer.from_pretrained(model_dir).get_vocab())


def test_a_rerun_after_a_crash_resumes_from_the_last_checkpoint(corpus, char_bert, tmp_path):
    from parasim.train.core.contrastive import fit_contrastive, triples

    data = triples(corpus, [FR])
    kw = dict(
        steps=4, batch_size=4, learning_rate=1e-3, seed=0, max_length=32, save_steps=2,
        logging_steps=1, device="cpu", dtype="float32",
    )  # fmt: skip
    run = tmp_path / "run"
    full = fit_contrastive(char_bert, data, run, **kw)
    assert full.steps_run == 4
    ckpts = run / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    weights = _weights(full.model_dir)
    # the crash: killed after checkpoint-2, during checkpoint-4 (its state file not yet written)
    shutil.rmtree(full.model_dir)
    (ckpts / "checkpoint-4" / "trainer_state.json").unlink()
    again = fit_contrastive(char_bert, data, run, **kw)
    assert again.resumed_from == "checkpoint-2"
    assert again.global_step == 4 and again.steps_run == 2
    assert again.model_dir.is_dir()
    # the resumed run's steps 3 and 4 are those of the uninterrupted one
    assert [s for s, _ in again.losses] == [1, 2, 3, 4]
    assert [x for _, x in again.losses] == pytest.approx([x for _, x in full.losses], rel=1e-4)
    state = json.loads((ckpts / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    # restored optimizer, schedule, RNG and data order: the model of the uninterrupted run
    resumed = _weights(again.model_dir)
    assert resumed.keys() == weights.keys()
    assert max(float((resumed[k] - weights[k]).abs().max()) for k in weights) < 1e-6


def _weights(model_dir: Path) -> dict:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_checkpoints_of_other_settings_are_not_resumed(corpus, char_bert, tmp_path):
    from parasim.train.core.contrastive import fit_contrastive, triples

    data = triples(corpus, [FR])
    kw = dict(steps=2, batch_size=4, seed=0, max_length=32, save_steps=2, device="cpu",
              dtype="float32")  # fmt: skip
    fit_contrastive(char_bert, data, tmp_path / "run", learning_rate=1e-3, **kw)
    other = fit_contrastive(char_bert, data, tmp_path / "run", learning_rate=1e-4, **kw)
    assert other.resumed_from is None and other.steps_run == 2


def test_fit_refuses_bad_settings(corpus, char_bert, tmp_path):
    from parasim.train.core.contrastive import fit_contrastive, triples

    data = triples(corpus, [FR])
    with pytest.raises(ValueError, match="warmup_ratio"):
        fit_contrastive(char_bert, data, tmp_path, steps=1, batch_size=2, warmup_ratio=1.5)
    with pytest.raises(ValueError, match="steps"):
        fit_contrastive(char_bert, data, tmp_path, steps=0, batch_size=2)
    with pytest.raises(ValueError, match="loss one of"):
        fit_contrastive(char_bert, data, tmp_path, steps=1, batch_size=2, loss="triplet")


def test_the_graded_ranking_loss_is_cosent_over_every_pair_of_the_batch():
    """The loss against its definition, pair of pairs by pair of pairs."""
    import itertools

    import torch

    from parasim.train.core.losses import graded_ranking_loss

    torch.manual_seed(0)
    b, d, scale = 3, 5, 20.0
    anchor, positive, negative = (torch.randn(b, d) for _ in range(3))
    grade = torch.tensor([1.0, 0.0, 1.0])  # divergent, unrelated, divergent negatives
    cos = torch.nn.functional.cosine_similarity
    pairs = []  # (grade, scaled cosine) of every anchor against every positive and negative
    for i in range(b):
        for j in range(b):
            pairs.append((2.0 if i == j else 0.0, scale * cos(anchor[i], positive[j], dim=0)))
            g = float(grade[i]) if i == j else 0.0
            pairs.append((g, scale * cos(anchor[i], negative[j], dim=0)))
    terms = [torch.tensor(0.0)] + [
        lo - hi for (g_hi, hi), (g_lo, lo) in itertools.permutations(pairs, 2) if g_hi > g_lo
    ]
    expected = torch.logsumexp(torch.stack(terms), dim=0)
    got = graded_ranking_loss(anchor, positive, negative, grade, scale)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    # the order it asks for: a batch ranked by grade scores lower than the same batch reversed
    good = graded_ranking_loss(anchor, anchor + 0.01 * positive, anchor + 0.5 * negative,
                               torch.ones(b))  # fmt: skip
    bad = graded_ranking_loss(anchor, anchor + 0.5 * negative, anchor + 0.01 * positive,
                              torch.ones(b))  # fmt: skip
    assert float(good) < float(bad)


def test_the_graded_ranking_loss_trains_on_the_negatives_grades(corpus, char_bert, tmp_path):
    from parasim.train.core.contrastive import (
        RANK_DIVERGENT,
        RANK_UNRELATED,
        RUN_FILE,
        fit_contrastive,
        triples,
    )

    data = triples(corpus, [FR])
    grades = data.negative_grades()
    assert grades == [
        RANK_UNRELATED if s == "unrelated" else RANK_DIVERGENT for s in data.source
    ] and set(grades) == {RANK_DIVERGENT, RANK_UNRELATED}
    ds = data.dataset(with_grades=True)
    assert ds.column_names == ["anchor", "positive", "negative", "label"]
    assert ds["label"] == grades and data.dataset().column_names == ds.column_names[:3]
    res = fit_contrastive(
        char_bert, data, tmp_path / "run", steps=2, batch_size=4, learning_rate=1e-3, seed=0,
        max_length=32, save_steps=100, logging_steps=1, device="cpu", dtype="float32",
        loss="graded_ranking",
    )  # fmt: skip
    assert res.global_step == 2 and all(math.isfinite(x) for _, x in res.losses)
    record = json.loads((res.model_dir / RUN_FILE).read_text())
    assert record["settings"]["loss"] == "GradedRankingLoss"
    assert "GradedRankingLoss" in (res.model_dir / "README.md").read_text()
    # another loss is another run: its checkpoints are not resumed
    other = fit_contrastive(
        char_bert, data, tmp_path / "run", steps=2, batch_size=4, learning_rate=1e-3, seed=0,
        max_length=32, save_steps=1, device="cpu", dtype="float32",
    )  # fmt: skip
    assert other.resumed_from is None


def test_merged_weights_lie_between_the_start_and_the_fine_tuned_model(corpus, char_bert, tmp_path):
    import torch

    from parasim.train.core.contrastive import (
        MERGE_FILE,
        RUN_FILE,
        build_model,
        fit_contrastive,
        merge_weights,
        triples,
    )

    res = fit_contrastive(
        char_bert, triples(corpus, [FR]), tmp_path / "run", steps=2, batch_size=4,
        learning_rate=1e-2, seed=0, max_length=32, save_steps=100, device="cpu",
        dtype="float32", loss="graded_ranking",
    )  # fmt: skip
    start = {k: v.detach().clone() for k, v in build_model(char_bert, max_length=32)
             .state_dict().items()}  # fmt: skip
    tuned = _weights(res.model_dir)
    moved = [k for k in tuned if tuned[k].is_floating_point() and not torch.equal(tuned[k],
             start[k])]  # fmt: skip
    assert moved  # the fine-tuning changed weights
    for share in (0.0, 0.5, 1.0):
        out = merge_weights(char_bert, res.model_dir, share, tmp_path / f"m{share}", max_length=32)
        merged = _weights(out)
        assert merged.keys() == tuned.keys()
        for k in moved:
            want = (1 - share) * start[k] + share * tuned[k]
            assert torch.allclose(merged[k], want, atol=1e-6), k
        record = json.loads((out / MERGE_FILE).read_text())
        assert record["share"] == share and record["method"] == "WiSE-FT"
        assert (out / RUN_FILE).is_file() and "WiSE-FT" in (out / "README.md").read_text()
    with pytest.raises(ValueError, match="must lie in"):
        merge_weights(char_bert, res.model_dir, 1.5, tmp_path / "bad", max_length=32)
    other = make_tiny_bert(tmp_path / "word-bert")  # another vocabulary: other shapes
    with pytest.raises(ValueError, match="cannot merge"):
        merge_weights(other, res.model_dir, 0.5, tmp_path / "bad", max_length=32)
    assert not (tmp_path / "bad").exists()


def test_the_retention_is_the_mean_cosine_distance_to_the_start_scaled():
    import torch

    from parasim.train.core.losses import retention_loss

    torch.manual_seed(0)
    x, start = torch.randn(6, 5), torch.randn(6, 5)
    cos = torch.nn.functional.cosine_similarity(x, start, dim=-1)
    assert float(retention_loss(x, start, 0.5, 20.0)) == pytest.approx(
        0.5 * 20.0 * float((1 - cos).mean()), rel=1e-6
    )
    assert float(retention_loss(start * 3.0, start, 1.0, 20.0)) == pytest.approx(0.0, abs=1e-5)


def test_the_retained_loss_pulls_the_model_back_to_its_start(char_bert):
    """At its start (no dropout) the retained loss is the ranking loss alone; once the weights
    move it is more, its gradient reaches the model being trained only, and the start is no
    submodule (the optimizer and save_pretrained do not see it)."""
    import torch

    from parasim.train.core.contrastive import build_model
    from parasim.train.core.losses import GradedRankingLoss, RetainedLoss

    st = build_model(char_bert, max_length=16, prefix="")
    st.eval()
    base = GradedRankingLoss(st)
    loss = RetainedLoss(st, base, weight=1.0)
    assert not any(n.startswith("start") for n, _ in loss.named_parameters())
    texts = [["ab cd", "ef gh"], ["ab ce", "eg hf"], ["xy zz", "qq rr"]]
    features = [st.tokenize(t) for t in texts]
    labels = torch.tensor([1.0, 0.0])
    with torch.no_grad():
        assert float(loss(features, labels)) == pytest.approx(
            float(base(features, labels)), abs=1e-4
        )
    with torch.no_grad():
        for p in st.parameters():
            if p.dim() == 2:
                p.add_(0.05 * torch.randn_like(p))
    moved = loss(features, labels)
    assert float(moved.detach()) > float(base(features, labels).detach()) + 1e-4
    moved.backward()
    assert any(p.grad is not None for p in st.parameters())
    assert all(p.grad is None for p in loss.start.parameters())
    with pytest.raises(ValueError, match="weight above 0"):
        RetainedLoss(st, base, weight=0.0)


def test_training_with_retention_stays_nearer_the_start(corpus, char_bert, tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer

    from parasim.train.core.contrastive import RUN_FILE, build_model, fit_contrastive, triples

    data = triples(corpus, [FR])
    texts = sorted({*data.anchor, *data.positive, *data.negative})
    start = build_model(char_bert, max_length=32, prefix="").encode(texts, convert_to_tensor=True)

    def drift(retain: float) -> float:
        res = fit_contrastive(
            char_bert, data, tmp_path / f"run-{retain}", steps=6, batch_size=4,
            learning_rate=3e-3, seed=0, max_length=32, prefix="", save_steps=100,
            device="cpu", dtype="float32", loss="graded_ranking", retain=retain,
        )  # fmt: skip
        record = json.loads((res.model_dir / RUN_FILE).read_text())
        assert record["settings"]["retain"] == retain
        card = (res.model_dir / "README.md").read_text()
        assert ("RetainedLoss" in card) == (retain > 0)
        got = SentenceTransformer(str(res.model_dir)).encode(texts, convert_to_tensor=True)
        return float((1 - torch.nn.functional.cosine_similarity(got, start)).mean())

    free, held = drift(0.0), drift(5.0)
    assert held < free
    with pytest.raises(ValueError, match="retain at least 0"):
        fit_contrastive(char_bert, data, tmp_path / "bad", steps=1, batch_size=2, retain=-1.0)
