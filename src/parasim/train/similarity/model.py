"""The two sentence-pair classifiers of seed 001 §4.1, as torch modules, and their model folders.

Both encode each side apart into a vector (u for sentence1, v for sentence2) and classify the
pair from ``[u; v; |u - v|; u * v]`` with the seed's eq. 4 head: dropout, a fully connected layer
with a sigmoid, dropout, and a linear layer to the two classes (softmax cross-entropy, eq. 5).

* :class:`BiLSTMMax` (``bilstm``): InferSent's encoder, a bidirectional LSTM over frozen word
  vectors, max-pooled over time (eqs. 1-2). The word vectors are the rows of a vocabulary cut
  from a source: the input embeddings of a ``transformers`` encoder (default: the rebuilt
  multilingual e5, text split by its own tokenizer), or a word2vec / fastText file read by
  ``gensim`` (the seed: 300-d MUSE vectors, which are in word2vec text format).
* :class:`~parasim.train.core.encoder.TransformerMean` (``biencoder``): a fine-tuned transformer
  encoder, mean-pooled over the attention mask (the rebuilt multilingual e5 offline; any hub name
  where reachable).

A model folder holds ``similarity.json`` (kind, sizes, vocabulary source), ``head.safetensors``
and the encoder: ``vocab.json`` + ``word_vectors.safetensors`` + ``lstm.safetensors`` (and the
source tokenizer, when the vectors came from a transformers model), or the fine-tuned encoder
written with ``save_pretrained`` beside its tokenizer.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from parasim.train.core.data import Split
from parasim.train.core.encoder import TransformerMean

INFO_FILE = "similarity.json"
#: Rows 0 and 1 of every vocabulary: padding and out-of-vocabulary words (zero vectors).
PAD, UNK = "<pad>", "<unk>"
_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``[u; v; |u - v|; u * v]`` (seed 001 eq. 3)."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


class PairHead(nn.Module):
    """Seed 001 eq. 4: dropout, FC + sigmoid, dropout, FC to 2 classes (logits); 3 classes
    (unrelated, equivalent, divergent) for the graded corpus (issue 49). Class 1 is similar."""

    def __init__(self, dim: int, fc: int, dropout: float, classes: int = 2) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(4 * dim, fc), nn.Sigmoid(),
            nn.Dropout(dropout), nn.Linear(fc, classes),
        )  # fmt: skip

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.net(pair_features(u, v))


class WordTokenizer:
    """Text -> vocabulary rows: the source tokenizer's pieces, or words (regex) for vector files."""

    def __init__(self, vocab: Sequence[str], hf_tokenizer=None, lowercase: bool = False) -> None:
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.hf = hf_tokenizer
        self.lowercase = lowercase

    def pieces(self, text: str) -> list[str]:
        if self.hf is not None:
            return self.hf.tokenize(text)
        return _WORD_RE.findall(text.lower() if self.lowercase else text)

    def ids(self, text: str, max_length: int) -> list[int]:
        """Vocabulary rows of ``text`` (at least one: an empty text is one ``<unk>``)."""
        unk = self.index[UNK]
        out = [self.index.get(p, unk) for p in self.pieces(text)[:max_length]]
        return out or [unk]


def source_pieces(texts: Sequence[str], hf_tokenizer=None, lowercase: bool = False) -> list[str]:
    """Every distinct piece of ``texts`` (first-seen order) under the given tokenisation."""
    tok = WordTokenizer([PAD, UNK], hf_tokenizer, lowercase)
    seen: dict[str, None] = {}
    for t in texts:
        for p in tok.pieces(t):
            seen.setdefault(p, None)
    return list(seen)


class BiLSTMMax(nn.Module):
    """InferSent's BiLSTM-max over frozen word vectors (seed 001 eqs. 1-2)."""

    def __init__(self, vectors: torch.Tensor, hidden: int) -> None:
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(vectors.float(), freeze=True, padding_idx=0)
        self.lstm = nn.LSTM(vectors.shape[1], hidden, batch_first=True, bidirectional=True)
        self.dim = 2 * hidden

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, padding_value=-1e4)
        return h.max(dim=1).values


class PairClassifier(nn.Module):
    """Siamese encoder (shared weights) + :class:`PairHead`, with its own batching of texts."""

    def __init__(self, kind: str, encoder: nn.Module, tokenizer, info: dict) -> None:
        super().__init__()
        self.kind = kind
        self.encoder = encoder
        self.tokenizer = tokenizer  # WordTokenizer (bilstm) or a transformers tokenizer
        self.info = dict(info)
        self.head = PairHead(encoder.dim, info["fc"], info["dropout"], info.get("classes", 2))

    @property
    def device(self) -> torch.device:
        return self.head.net[1].weight.device

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """Sentence vectors of ``texts`` (one batch)."""
        max_length = self.info["max_length"]
        if self.kind == "bilstm":
            rows = [self.tokenizer.ids(t, max_length) for t in texts]
            lengths = torch.tensor([len(r) for r in rows])
            ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
            for i, r in enumerate(rows):
                ids[i, : len(r)] = torch.tensor(r)
            return self.encoder(ids.to(self.device), lengths)
        prefix = self.info.get("prefix", "")
        enc = self.tokenizer(
            [prefix + t for t in texts], truncation=True, max_length=max_length,
            padding=True, return_tensors="pt",
        )  # fmt: skip
        keep = ("input_ids", "attention_mask", "token_type_ids")
        return self.encoder(**{k: v.to(self.device) for k, v in enc.items() if k in keep})

    def forward(self, s1: Sequence[str], s2: Sequence[str]) -> torch.Tensor:
        """Class logits (0 dissimilar, 1 similar), float32."""
        n = len(s1)
        vec = self.embed(list(s1) + list(s2))  # one pass: shared weights, one padding
        return self.head(vec[:n], vec[n:]).float()


def build_vectors_from_encoder(
    name: str, texts: Sequence[str], key: str
) -> tuple[list[str], torch.Tensor, Any]:
    """Vocabulary, vectors and tokenizer cut from the input embeddings of encoder ``name``."""
    from parasim.models import load_encoder

    model, tokenizer = load_encoder(name, device="cpu", dtype="float32", key=key)
    table = model.get_input_embeddings().weight.detach()
    pieces = source_pieces(texts, tokenizer)
    ids = tokenizer.convert_tokens_to_ids(pieces)
    unk_id = tokenizer.unk_token_id
    kept = [(p, i) for p, i in zip(pieces, ids, strict=True) if i is not None and i != unk_id]
    vocab = [PAD, UNK] + [p for p, _ in kept]
    vectors = torch.zeros(len(vocab), table.shape[1])
    if kept:
        vectors[2:] = table[torch.tensor([i for _, i in kept])]
    del model
    return vocab, vectors, tokenizer


def build_vectors_from_file(
    path: str, fmt: str, texts: Sequence[str], lowercase: bool, key: str
) -> tuple[list[str], torch.Tensor]:
    """Vocabulary and vectors of the corpus words found in a word2vec / fastText file (gensim)."""
    from gensim.models import KeyedVectors
    from gensim.models.fasttext import load_facebook_vectors

    from parasim.config import ConfigError

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{key}: word-vector file not found: {p}")
    if fmt == "auto":
        fmt = "word2vec-binary" if p.suffix == ".bin" else "word2vec"
    try:
        if fmt == "fasttext":
            kv = load_facebook_vectors(str(p))
        else:
            kv = KeyedVectors.load_word2vec_format(str(p), binary=fmt == "word2vec-binary")
    except (OSError, ValueError, UnicodeDecodeError, EOFError) as exc:
        raise ConfigError(f"{key}: cannot read {p} as {fmt} vectors: {exc}") from None
    pieces = source_pieces(texts, None, lowercase)
    # fastText builds vectors for unseen words from character n-grams; word2vec files do not
    kept = [w for w in pieces if fmt == "fasttext" or w in kv.key_to_index]
    vocab = [PAD, UNK] + kept
    vectors = torch.zeros(len(vocab), kv.vector_size)
    if kept:
        vectors[2:] = torch.tensor(kv[kept])
    return vocab, vectors


def build_classifier(kind: str, info: dict, texts: Sequence[str] = ()) -> PairClassifier:
    """A fresh :class:`PairClassifier` from settings ``info`` (see :func:`model_info`)."""
    from parasim.models import load_encoder

    if kind == "bilstm":
        src = info["word_vectors"]
        key = "train.similarity.bilstm.word_vectors"
        hf = None
        if info["vectors_source"] == "file":
            vocab, vectors = build_vectors_from_file(
                src, info["vectors_format"], texts, info["lowercase"], key
            )
        else:
            vocab, vectors, hf = build_vectors_from_encoder(src, texts, key)
        tok = WordTokenizer(vocab, hf, info["lowercase"] and hf is None)
        encoder = BiLSTMMax(vectors, info["hidden"])
        return PairClassifier(kind, encoder, tok, {**info, "vocab_size": len(vocab)})
    enc, tok = load_encoder(
        info["model"], device="cpu", dtype="float32", key="train.similarity.biencoder.model"
    )
    if info.get("freeze_embeddings"):
        enc.get_input_embeddings().weight.requires_grad_(False)
    return PairClassifier(kind, TransformerMean(enc), tok, info)


def save_classifier(model: PairClassifier, path: str | Path, meta: dict | None = None) -> None:
    """Write a model folder (see the module docstring); ``meta`` is added to ``similarity.json``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    def cpu(sd: dict) -> dict:
        return {k: v.detach().contiguous().cpu() for k, v in sd.items()}

    save_file(cpu(model.head.state_dict()), str(path / "head.safetensors"))
    if model.kind == "bilstm":
        tok: WordTokenizer = model.tokenizer
        (path / "vocab.json").write_text(json.dumps(tok.vocab, ensure_ascii=False), "utf-8")
        save_file(
            cpu({"weight": model.encoder.embed.weight}), str(path / "word_vectors.safetensors")
        )
        save_file(cpu(model.encoder.lstm.state_dict()), str(path / "lstm.safetensors"))
        if tok.hf is not None:
            tok.hf.save_pretrained(path / "tokenizer")
    else:
        model.encoder.encoder.save_pretrained(path)
        model.tokenizer.save_pretrained(path)
    info = {"kind": model.kind, **model.info, **(meta or {})}
    (path / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True, default=str), "utf-8")


def load_classifier(path: str | Path, device: str = "cpu") -> PairClassifier:
    """A :class:`PairClassifier` from a folder :func:`save_classifier` wrote (eval mode)."""
    from safetensors.torch import load_file

    path = Path(path)
    if not (path / INFO_FILE).is_file():
        raise FileNotFoundError(f"{path}: not a similarity model folder (no {INFO_FILE})")
    info = json.loads((path / INFO_FILE).read_text("utf-8"))
    kind = info["kind"]
    if kind == "bilstm":
        from transformers import AutoTokenizer

        vocab = json.loads((path / "vocab.json").read_text("utf-8"))
        vectors = load_file(str(path / "word_vectors.safetensors"))["weight"]
        hf = (
            AutoTokenizer.from_pretrained(path / "tokenizer")
            if (path / "tokenizer").is_dir()
            else None
        )
        tok = WordTokenizer(vocab, hf, info["lowercase"] and hf is None)
        encoder = BiLSTMMax(vectors, info["hidden"])
        encoder.lstm.load_state_dict(load_file(str(path / "lstm.safetensors")))
    else:
        from parasim.models import load_encoder

        enc, tok = load_encoder(str(path), device="cpu", dtype="float32", key=f"model {path}")
        encoder = TransformerMean(enc)
    model = PairClassifier(kind, encoder, tok, info)
    model.head.load_state_dict(load_file(str(path / "head.safetensors")))
    return model.to(device).eval()


def extend_vocabulary(model: PairClassifier, texts: Sequence[str]) -> int:
    """Add the pieces of ``texts`` missing from a BiLSTM's vocabulary, with their vectors from
    the model's source (its encoder or vector file): the trained weights stay as they are.

    Returns:
        The number of rows added (0 for a bi-encoder, whose tokenizer covers any text).
    """
    if model.kind != "bilstm":
        return 0
    info = model.info
    tok: WordTokenizer = model.tokenizer
    missing = [t for t in texts if any(p not in tok.index for p in tok.pieces(t))]
    if not missing:
        return 0
    key = "similarity model word_vectors"
    if info["vectors_source"] == "file":
        vocab, vectors = build_vectors_from_file(
            info["word_vectors"], info["vectors_format"], missing, info["lowercase"], key
        )
    else:
        vocab, vectors, _ = build_vectors_from_encoder(info["word_vectors"], missing, key)
    new = [(w, i) for i, w in enumerate(vocab) if i >= 2 and w not in tok.index]
    if not new:
        return 0
    old = model.encoder.embed.weight.detach()
    rows = torch.cat([old, vectors[[i for _, i in new]].to(old)], 0)
    model.encoder.embed = nn.Embedding.from_pretrained(rows, freeze=True, padding_idx=0)
    model.tokenizer = WordTokenizer(tok.vocab + [w for w, _ in new], tok.hf, tok.lowercase)
    model.info["vocab_size"] = len(model.tokenizer.vocab)
    return len(new)


def model_info(encoder: str, cfg: Any) -> dict:
    """The settings a fresh classifier is built from (saved in ``similarity.json``)."""
    info = dataclasses.asdict(cfg)
    info.pop("max_folds", None)
    if encoder == "bilstm":
        src = cfg.word_vectors
        is_file = Path(src).is_file() and not Path(src, "config.json").exists()
        info["vectors_source"] = "file" if is_file else "encoder"
    return info


def predict(model, split: Split, batch_size: int) -> list[float]:
    """P(similar) of every pair (eval mode, no gradients; the model's mode is restored).

    A model that shipped its untrained start (``decision: cosine`` in its ``similarity.json``)
    answers 1 or 0: its encoder's cosine above its ``threshold`` or not."""
    import torch

    info = getattr(model, "info", None) or {}
    if info.get("decision") == "cosine":
        return [float(c > info["threshold"]) for c in cosines(model, split, batch_size)]
    out: list[float] = []
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(split), batch_size):
            logits = model(split.s1[i : i + batch_size], split.s2[i : i + batch_size])
            out += torch.softmax(logits, -1)[:, 1].cpu().tolist()
    model.train(was)
    return out


def cosines(model, split: Split, batch_size: int) -> list[float]:
    """Cosine of the two sides' vectors under ``model``'s encoder (the untrained baseline)."""
    import torch

    out: list[float] = []
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(split), batch_size):
            a = model.embed(split.s1[i : i + batch_size])
            b = model.embed(split.s2[i : i + batch_size])
            out += torch.nn.functional.cosine_similarity(a.float(), b.float()).cpu().tolist()
    model.train(was)
    return out
