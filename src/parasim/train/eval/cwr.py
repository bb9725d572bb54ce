"""Contextual word retrieval (seed 003 §3.2) and the rotation baseline (seed 003 eq. 1).

Given parallel sentences with word pairs, every word of every sentence gets the encoder's vector
of its last subword (the sentence fed as pre-split words, as the seed feeds Moses tokens). For each
word pair (i, j) of the evaluated set, the source word retrieves among *all* words of *all* target
sentences by CSLS (Conneau et al. 2018, k = 10); a hit is the exact target word of the exact
sentence. The accuracy is averaged over both directions (source -> target, target -> source).

* **non-contextual** retrieval keeps only the first occurrence of each (lower-cased) word type on
  each side: the candidates are those occurrences, and the word pairs those whose two words both are
  first occurrences.
* **unseen**: word pairs whose (English type, other type) occurs among the training word pairs are
  left out of the evaluated pairs (seed 003: "only include word pairs not seen in the training
  set"); they stay candidates.
* **by part of speech** (seed 003 Table 4): accuracy per UPOS group of the English word (spaCy):
  ``open`` (NOUN, VERB, ADJ, ADV), ``closed`` (DET, ADP, CCONJ, SCONJ, PRON, AUX), ``overlap``
  (NUM, PUNCT, PROPN: mostly removed as exact matches already).

The rotation baseline learns the orthogonal W minimising ||W f(i, s) - f(j, t)|| over the training
word pairs (Procrustes, closed form by SVD) and applies it to the non-English vectors.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

log = logging.getLogger("parasim.train")

OPEN_CLASS = frozenset({"NOUN", "VERB", "ADJ", "ADV"})
CLOSED_CLASS = frozenset({"DET", "ADP", "CCONJ", "SCONJ", "PRON", "AUX"})
OVERLAP_CLASS = frozenset({"NUM", "PUNCT", "PROPN"})


def pos_group(tag: str | None) -> str | None:
    """``open`` / ``closed`` / ``overlap`` for a UPOS tag; None for the omitted ones."""
    if tag in OPEN_CLASS:
        return "open"
    if tag in CLOSED_CLASS:
        return "closed"
    if tag in OVERLAP_CLASS:
        return "overlap"
    return None


@dataclasses.dataclass
class ParallelSet:
    """Sentences of one language pair with word pairs (English is the first side).

    Attributes:
        en: English word lists.
        other: other-language word lists.
        links: per sentence pair, the word pairs ``(en index, other index)``.
        en_pos: per English sentence, the UPOS tag of every word (None: no tags).
        lang: the other language.
    """

    en: list[list[str]]
    other: list[list[str]]
    links: list[list[tuple[int, int]]]
    en_pos: list[list[str]] | None = None
    lang: str = ""

    def __len__(self) -> int:
        return len(self.en)


def last_subword_index(word_ids: Sequence[int | None], n_words: int) -> list[int]:
    """For each word, the position of its last subword (-1 when it has none)."""
    out = [-1] * n_words
    for pos, w in enumerate(word_ids):
        if w is not None and w < n_words:
            out[w] = pos
    return out


def special_positions(word_ids: Sequence[int | None], mask: Sequence[int]) -> list[int]:
    """Positions of the sentence-start and sentence-end special tokens of one encoded sentence
    (``-1`` each when the tokenizer adds none there)."""
    real = [p for p, m in enumerate(mask) if m]
    if len(real) < 2:
        return [-1, -1]
    return [p if word_ids[p] is None else -1 for p in (real[0], real[-1])]


def tokenize_words(
    tokenizer, sentences: Sequence[Sequence[str]], max_length: int, device=None,
    special: bool = False,
):  # fmt: skip
    """Model inputs for pre-split sentences and, per sentence, each word's last-subword position
    (``special``: followed by the start and end special tokens', :func:`special_positions`)."""
    enc = tokenizer(
        [list(s) for s in sentences],
        is_split_into_words=True,
        truncation=True,
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    )
    last = [last_subword_index(enc.word_ids(b), len(s)) for b, s in enumerate(sentences)]
    if special:
        mask = enc["attention_mask"].tolist()
        last = [idx + special_positions(enc.word_ids(b), mask[b]) for b, idx in enumerate(last)]
    inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
    if device is not None:
        inputs = {k: v.to(device) for k, v in inputs.items()}
    return inputs, last


def word_states(
    model, tokenizer, sentences: Sequence[Sequence[str]], max_length: int = 128,
    special: bool = False,
):  # fmt: skip
    """Differentiable last-subword states: a list of (words, hidden) tensors, one per sentence.

    A word without a subword (truncated) gets a zero row; callers skip those words (they are
    counted out at extraction). ``special``: two more rows per sentence, the states of the
    sentence-start and sentence-end special tokens (``[CLS]``/``<s>``, ``[SEP]``/``</s>``; zero
    rows when the tokenizer adds none).
    """
    import torch

    device = next(model.parameters()).device
    inputs, last = tokenize_words(tokenizer, sentences, max_length, device, special)
    hidden = model(**inputs).last_hidden_state
    out = []
    for b, idx in enumerate(last):
        pos = torch.tensor([max(p, 0) for p in idx], dtype=torch.long, device=device)
        h = hidden[b].index_select(0, pos)
        missing = torch.tensor([p < 0 for p in idx], device=device)
        out.append(torch.where(missing.unsqueeze(-1), torch.zeros_like(h), h))
    return out


def word_vectors(
    model, tokenizer, sentences: Sequence[Sequence[str]], max_length: int = 256,
    batch_size: int = 32,
) -> list[np.ndarray]:  # fmt: skip
    """Float32 last-subword vectors of every word, per sentence, batched longest first."""
    import torch

    out: list[np.ndarray] = [np.zeros((0, 0), np.float32)] * len(sentences)
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            states = word_states(model, tokenizer, [sentences[i] for i in idx], max_length)
            for i, h in zip(idx, states, strict=True):
                out[i] = h.float().cpu().numpy()
    return out


def procrustes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The orthogonal W minimising ||x W - y||_F (rows are word pairs): W = U V^T of svd(x^T y)."""
    u, _, vt = np.linalg.svd(x.T.astype(np.float64) @ y.astype(np.float64))
    return (u @ vt).astype(np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


def _knn_mean(a, b, k: int, chunk: int = 2048):
    """For every row of ``a``: mean cosine to its k nearest rows of ``b`` (unit vectors, torch)."""
    import torch

    k = min(k, b.shape[0])
    out = torch.empty(a.shape[0], dtype=torch.float32)
    for s in range(0, a.shape[0], chunk):
        out[s : s + chunk] = (a[s : s + chunk] @ b.T).topk(k, dim=1).values.mean(dim=1)
    return out


def csls_hits(src: np.ndarray, trg: np.ndarray, queries: np.ndarray, gold: np.ndarray, k: int = 10):
    """Whether each query row of ``src`` retrieves its ``gold`` row of ``trg`` by CSLS.

    CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y), with r_T(x) the mean cosine of x to its k nearest
    target rows and r_S(y) of y to its k nearest source rows (Conneau et al. 2018).
    """
    import torch

    if len(queries) == 0:
        return np.zeros(0, dtype=bool)
    s = torch.from_numpy(_unit(src.astype(np.float32)))
    t = torch.from_numpy(_unit(trg.astype(np.float32)))
    r_s = _knn_mean(t, s, k)  # per target row: its neighbourhood among the sources
    q = s[torch.from_numpy(np.asarray(queries, dtype=np.int64))]
    r_t = _knn_mean(q, t, k)
    best = torch.empty(len(queries), dtype=torch.long)
    for a in range(0, len(queries), 2048):
        score = 2 * (q[a : a + 2048] @ t.T) - r_t[a : a + 2048, None] - r_s[None, :]
        best[a : a + 2048] = score.argmax(dim=1)
    return best.numpy() == np.asarray(gold)


@dataclasses.dataclass
class _Flat:
    vecs: np.ndarray  # all words of all sentences of one side
    offset: np.ndarray  # first row of each sentence
    types: list[str]  # lower-cased word of each row


def _flatten(vectors: Sequence[np.ndarray], words: Sequence[Sequence[str]]) -> _Flat:
    sizes = [len(w) for w in words]
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    dim = next((v.shape[1] for v in vectors if v.size), 1)
    vecs = np.concatenate([v if v.size else np.zeros((0, dim), np.float32) for v in vectors])
    return _Flat(vecs, offset, [w.lower() for ws in words for w in ws])


def _first_occurrences(types: Sequence[str]) -> np.ndarray:
    seen: set[str] = set()
    keep = np.zeros(len(types), dtype=bool)
    for r, t in enumerate(types):
        if t not in seen:
            seen.add(t)
            keep[r] = True
    return keep


def retrieval(
    data: ParallelSet,
    en_vecs: Sequence[np.ndarray],
    other_vecs: Sequence[np.ndarray],
    seen_types: Iterable[tuple[str, str]] = (),
    k: int = 10,
    per_item: bool = False,
) -> dict[str, Any]:
    """Contextual and non-contextual CSLS word retrieval, both directions, with POS breakdown.

    Args:
        data: the evaluated sentences and word pairs.
        en_vecs: per sentence, one vector per English word.
        other_vecs: per sentence, one vector per word of the other language.
        seen_types: (English type, other type) pairs, lower-cased, seen in training: left out.
        k: CSLS neighbourhood.
        per_item: also ``hits``: per evaluated word pair, the mean of its two directions'
            hits (0, 0.5 or 1; their mean is ``accuracy``), what a bootstrap resamples.

    Returns:
        ``{"contextual": {...}, "non_contextual": {...}}``, each with ``accuracy`` (mean of both
        directions), ``en_to_other``, ``other_to_en``, ``word_pairs`` and ``by_pos``
        (group -> {accuracy, word_pairs}).
    """
    seen = set(seen_types)
    en = _flatten(en_vecs, data.en)
    ot = _flatten(other_vecs, data.other)
    rows_e, rows_o, groups = [], [], []
    n_seen = 0
    for s, links in enumerate(data.links):
        for i, j in links:
            pair = (data.en[s][i].lower(), data.other[s][j].lower())
            if pair in seen:
                n_seen += 1
                continue
            rows_e.append(en.offset[s] + i)
            rows_o.append(ot.offset[s] + j)
            tag = data.en_pos[s][i] if data.en_pos is not None else None
            groups.append(pos_group(tag))
    rows_e_a = np.asarray(rows_e, dtype=np.int64)
    rows_o_a = np.asarray(rows_o, dtype=np.int64)
    out: dict[str, Any] = {"seen_word_pairs_left_out": n_seen}
    for setting in ("contextual", "non_contextual"):
        if setting == "contextual":
            keep_e = np.ones(len(en.types), dtype=bool)
            keep_o = np.ones(len(ot.types), dtype=bool)
        else:
            keep_e, keep_o = _first_occurrences(en.types), _first_occurrences(ot.types)
        new_e = np.cumsum(keep_e) - 1  # old row -> row among the kept
        new_o = np.cumsum(keep_o) - 1
        sel = keep_e[rows_e_a] & keep_o[rows_o_a] if len(rows_e_a) else np.zeros(0, bool)
        qe, qo = new_e[rows_e_a[sel]], new_o[rows_o_a[sel]]
        ev, ov = en.vecs[keep_e], ot.vecs[keep_o]
        h_eo = csls_hits(ev, ov, qe, qo, k)
        h_oe = csls_hits(ov, ev, qo, qe, k)
        g = [x for x, m in zip(groups, sel, strict=True) if m]
        res: dict[str, Any] = {
            "word_pairs": int(sel.sum()),
            "en_to_other": float(h_eo.mean()) if len(h_eo) else None,
            "other_to_en": float(h_oe.mean()) if len(h_oe) else None,
        }
        res["accuracy"] = (res["en_to_other"] + res["other_to_en"]) / 2 if len(h_eo) else None
        if per_item:
            res["hits"] = ((h_eo.astype(float) + h_oe.astype(float)) / 2).tolist()
        by_pos = {}
        for name in ("open", "closed", "overlap"):
            m = np.array([x == name for x in g], dtype=bool)
            if m.any():
                by_pos[name] = {
                    "accuracy": float((h_eo[m].mean() + h_oe[m].mean()) / 2),
                    "word_pairs": int(m.sum()),
                }
        res["by_pos"] = by_pos
        out[setting] = res
    return out


def evaluate_encoder(
    model, tokenizer, data: ParallelSet, seen_types=(), rotation: np.ndarray | None = None,
    k: int = 10, max_length: int = 256, batch_size: int = 32, per_item: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """CWR of ``model`` on ``data`` (``rotation``: applied to the non-English vectors first;
    ``per_item``: :func:`retrieval`'s per-word-pair hits too)."""
    en_v = word_vectors(model, tokenizer, data.en, max_length, batch_size)
    ot_v = word_vectors(model, tokenizer, data.other, max_length, batch_size)
    if rotation is not None:
        ot_v = [v @ rotation if v.size else v for v in ot_v]
    return retrieval(data, en_v, ot_v, seen_types, k, per_item)


def pair_vectors(
    model, tokenizer, data: ParallelSet, max_pairs: int = 50_000, max_length: int = 256,
    batch_size: int = 32,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(other-language, English) vectors of the word pairs of ``data`` (at most ``max_pairs``)."""
    xs, ys = [], []
    n = 0
    ends = np.cumsum([len(lk) for lk in data.links])
    last = int(np.searchsorted(ends, max_pairs)) + 1
    en_v = word_vectors(model, tokenizer, data.en[:last], max_length, batch_size)
    ot_v = word_vectors(model, tokenizer, data.other[:last], max_length, batch_size)
    for s in range(min(last, len(data))):
        for i, j in data.links[s]:
            if n >= max_pairs:
                break
            xs.append(ot_v[s][j])
            ys.append(en_v[s][i])
            n += 1
    return np.stack(xs), np.stack(ys)


def rotation_baseline(model, tokenizer, train: ParallelSet, max_pairs: int = 50_000) -> np.ndarray:
    """Procrustes rotation of the non-English word vectors onto the English ones (unit vectors)."""
    x, y = pair_vectors(model, tokenizer, train, max_pairs)
    return procrustes(_unit(x), _unit(y))
