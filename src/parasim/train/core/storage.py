"""One copy on disk of the weights several model folders share.

The shipped run fine-tunes multilingual-e5-small six times with its 96M embedding rows frozen:
each ``save_pretrained`` folder held its own copy of them (and of the 17 MB tokenizer), 2.9 GB
in ``results/models`` for about 0.5 GB of distinct bytes (issue 34). :func:`share_weights`
rewrites a folder's ``model.safetensors`` as transformers' sharded layout
(``model.safetensors.index.json`` and ``model-0000k-of-0000n.safetensors``): one shard per large
tensor (the embedding matrix), per encoder layer, and one for the rest; each shard, and the
tokenizer file, becomes a hard link to a content-addressed file of a store folder
(``results/models/.weights``). Identical shards of different models (the frozen embedding rows,
a layer nobody trained, a model that shipped its untrained start) are then one file on disk.

Nothing changes for a reader: ``AutoModel.from_pretrained(folder)`` reads the sharded layout,
and every file in the folder is a plain file (a hard link), so copying the folder copies the
weights. :func:`prune_store` drops the store's files no folder links any more.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

#: Tensors of at least this many bytes get a shard of their own.
OWN_SHARD_BYTES = 32 << 20
#: Files the folders share besides the weights (byte-identical across folders of one base).
SHARED_FILES = ("tokenizer.json", "sentencepiece.bpe.model")

_LAYER = re.compile(r"^(.*?layers?\.\d+)\.")


def _group(name: str, nbytes: int) -> str:
    if nbytes >= OWN_SHARD_BYTES:
        return name
    m = _LAYER.match(name)
    return m.group(1) if m else "~rest"


def _link_into_store(path: Path, store: Path) -> None:
    """Replace ``path`` by a hard link to its content's file in ``store`` (added when new).
    Where hard links are not possible (another file system) the file stays as it is."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    target = store / f"{h.hexdigest()}{path.suffix}"
    store.mkdir(parents=True, exist_ok=True)
    try:
        if not target.exists():
            tmp = store / f".{target.name}.{os.getpid()}.tmp"
            os.link(path, tmp)
            with contextlib.suppress(FileExistsError):  # another process may have added it
                os.link(tmp, target)
            tmp.unlink(missing_ok=True)
        if not os.path.samefile(path, target):
            tmp = path.with_name(f".{path.name}.link")
            tmp.unlink(missing_ok=True)
            os.link(target, tmp)
            os.replace(tmp, path)
    except OSError:
        pass


def share_weights(folder: str | os.PathLike, store: str | os.PathLike) -> int:
    """Shard ``folder``'s ``model.safetensors`` and link its shards and tokenizer into
    ``store`` (module docstring); returns the number of shards (0: nothing to shard)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    folder, store = Path(folder), Path(store)
    single = folder / "model.safetensors"
    n = 0
    if single.exists():
        groups: dict[str, dict] = {}
        with safe_open(str(single), framework="pt") as f:
            meta = f.metadata() or {}
            for name in f.keys():  # noqa: SIM118 (safe_open is no dict)
                t = f.get_tensor(name)
                groups.setdefault(_group(name, t.numel() * t.element_size()), {})[name] = t
        order = sorted(groups)
        n = len(order)
        weight_map, total = {}, 0
        for i, g in enumerate(order, 1):
            shard = folder / f"model-{i:05d}-of-{n:05d}.safetensors"
            save_file(groups[g], str(shard), metadata={"format": meta.get("format", "pt")})
            for name, t in groups[g].items():
                weight_map[name] = shard.name
                total += t.numel() * t.element_size()
            _link_into_store(shard, store)
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (folder / "model.safetensors.index.json").write_text(
            json.dumps(index, indent=2) + "\n", encoding="utf-8"
        )
        single.unlink()
    for name in SHARED_FILES:
        if (folder / name).is_file():
            _link_into_store(folder / name, store)
    return n


def load_weights(folder: str | os.PathLike) -> dict:
    """A folder's encoder weights as one state dict, from ``model.safetensors`` or the sharded
    layout :func:`share_weights` writes."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if (folder / "model.safetensors").exists():
        return load_file(str(folder / "model.safetensors"))
    index = json.loads((folder / "model.safetensors.index.json").read_text(encoding="utf-8"))
    out: dict = {}
    for shard in sorted(set(index["weight_map"].values())):
        out.update(load_file(str(folder / shard)))
    return out


def prune_store(store: str | os.PathLike) -> int:
    """Delete the store's files that no model folder links any more; returns how many."""
    store = Path(store)
    gone = 0
    for f in sorted(store.glob("*")) if store.is_dir() else []:
        if f.is_file() and f.stat().st_nlink == 1:
            f.unlink()
            gone += 1
    return gone
