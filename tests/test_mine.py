"""The mine stage: natural divergences, their guards against false negatives, what differs."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.io import MINED_SCHEMA, POSITIVES_SCHEMA, stable_id, write_table
from parasim.mine.diff import content_tokens, differences
from parasim.mine.stage import REASONS, MineSettings, mine_divergences
from parasim.stats import Recorder

#: English word -> French word: the toy encoder's shared vocabulary (a cross-lingual bag of words).
LEXICON = {
    "added": "nouveau",
    "version": "version",
    "see": "voir",
    "function": "fonction",
    "returns": "renvoie",
    "list": "liste",
    "files": "fichiers",
    "folders": "dossiers",
    "the": "la",
    "page": "page",
    "click": "cliquez",
    "here": "ici",
}


def toy_encoder(texts: list[str]) -> np.ndarray:
    """A bag of concepts: each word (English, or French by the lexicon) and each number a
    dimension; the same words in either language give the same vector."""
    fr_to_en = {v: k for k, v in LEXICON.items()}
    dims: dict[str, int] = {}
    rows = []
    for t in texts:
        v: dict[int, float] = {}
        for w in t.lower().replace(".", " ").replace("!", " ").replace("(", " ").split():
            w = fr_to_en.get(w, w)
            v[dims.setdefault(w, len(dims))] = 1.0
        rows.append(v)
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, v in enumerate(rows):
        for d, x in v.items():
            out[i, hash(str(d)) % 64 if d >= 64 else d] += x
    return out


def positive(i: int, en: str, fr: str, mt: str | None = None, page: int | None = None) -> dict:
    pair_id = f"p{i if page is None else page:03d}"
    return {
        "id": stable_id(pair_id, str(i)),
        "pair_id": pair_id,
        "site": "s1",
        "domain": "documentation",
        "lang_pair": "en-fr",
        "other_lang": "fr",
        "en_text": en,
        "other_text": fr,
        "other_en": mt if mt is not None else en,
        "method": "paper",
        "en_idx": [i],
        "other_idx": [i],
        "score": 0.8,
        "score_emb": None,
        "en_url": f"https://x/{pair_id}/en",
        "other_url": f"https://x/{pair_id}/fr",
    }


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)


#: The plain search: the toy encoder's cosine of the English side and the line, no centring (a
#: pool of two centred vectors is two opposite ones) and no rerank (tested apart below).
SETTINGS = {"min_similarity": 0.1, "neighbours": 8, "keep": 2, "center": False, "space": "cross",
            "surface_weight": 0.0}  # fmt: skip


def test_a_version_that_differs_is_mined_with_its_span_and_kind():
    rows = [
        positive(0, "Added in version 3.8.", "Nouveau dans la version 3.8."),
        positive(1, "Added in version 3.9.", "Nouveau dans la version 3.9."),
        positive(2, "Click here", "Cliquez ici"),
    ]
    rec = Recorder("mine")
    out = mine_divergences(table(rows), SETTINGS, rec, encoder=toy_encoder)
    assert out.schema.equals(MINED_SCHEMA, check_metadata=False)
    got = {(r["en_text"], r["other_text"]): r for r in out.to_pylist()}
    r = got[("Added in version 3.8.", "Nouveau dans la version 3.9.")]
    assert r["kind"] == "version" and r["partner_text"] == "Nouveau dans la version 3.8."
    assert [r["other_text"][s["start"] : s["end"]] for s in r["spans"]] == ["3.9"]
    assert [r["partner_text"][s["start"] : s["end"]] for s in r["partner_spans"]] == ["3.8"]
    assert r["cand_pair_id"] == "p001" and r["pair_id"] == "p000" and r["rank"] == 0
    assert 0 < r["similarity"] <= 1 + 1e-6 and 0 < r["partner_similarity"] <= 1 + 1e-6
    st = rec.stats()
    assert st.rows_in == 3 and st.rows_out == out.num_rows
    assert st.counts["kinds"]["version"] >= 2  # each way


@pytest.mark.parametrize(
    ("reason", "cand"),
    [
        # the partner's own text on another page
        ("copy_of_partner", positive(1, "Returns the list of files .", "Renvoie la liste des fichiers.", page=9)),  # noqa: E501
        # the same words as the partner but for case and punctuation
        ("formatting_only", positive(1, "returns the list of files!", "renvoie la liste des fichiers !")),  # noqa: E501
        # the same content words (an article differs)
        ("function_words_only", positive(1, "Returns a list of files", "Renvoie une liste des fichiers.")),  # noqa: E501
        # its own English is the positive's
        ("partner_of_duplicate", positive(1, "Returns the list of files.", "Renvoie la liste de fichiers présents.")),  # noqa: E501
        # its own English has the positive's content words
        ("partner_of_near_duplicate", positive(1, "Returns a list of the files", "Donne la liste de fichiers présents.")),  # noqa: E501
        # its machine translation says what the English side says
        ("mt_matches_english", positive(1, "Gives back files in a list", "Renvoie la liste complète des fichiers.", mt="Returns the list of files.")),  # noqa: E501
    ],
)  # fmt: skip
def test_each_guard_drops_a_translation_and_counts_it(reason, cand):
    base = positive(0, "Returns the list of files.", "Renvoie la liste des fichiers.")
    rec = Recorder("mine")
    out = mine_divergences(table([base, cand]), SETTINGS, rec, encoder=toy_encoder)
    mined_for_base = [r for r in out.to_pylist() if r["positive_id"] == base["id"]]
    assert mined_for_base == []
    assert rec.dropped(reason) >= 1
    assert reason in REASONS


def test_a_real_divergence_passes_every_guard():
    base = positive(0, "Returns the list of files.", "Renvoie la liste des fichiers.")
    cand = positive(1, "Returns the list of folders.", "Renvoie la liste des dossiers.")
    rec = Recorder("mine")
    out = mine_divergences(table([base, cand]), SETTINGS, rec, encoder=toy_encoder).to_pylist()
    assert {(r["positive_id"], r["candidate_id"]) for r in out} == {
        (base["id"], cand["id"]),
        (cand["id"], base["id"]),
    }
    assert out[0]["kind"] == "other" and rec.stats().n_dropped == 0


def test_min_similarity_keep_and_repeated_candidates():
    base = positive(0, "See the function here", "Voir la fonction ici")
    near = [positive(i, f"See the function {i}", f"Voir la fonction {i}") for i in range(1, 5)]
    copy = positive(9, "See the function 1", "Voir la fonction 1", page=20)  # line 1 twice
    far = positive(10, "Click", "Cliquez")
    rec = Recorder("mine")
    out = mine_divergences(
        table([base, *near, copy, far]),
        {**SETTINGS, "keep": 3, "min_similarity": 0.3},
        rec,
        encoder=toy_encoder,
    ).to_pylist()
    mine = [r for r in out if r["positive_id"] == base["id"]]
    assert len(mine) == 3 and [r["rank"] for r in mine] == [0, 1, 2]
    assert len({r["other_text"] for r in mine}) == 3
    assert all(r["other_text"] != "Cliquez" for r in out)
    assert rec.counted("positives_without_divergence") >= 1  # "Click" finds nothing close


def test_pools_are_per_site_and_language_pair_and_ordered():
    a = [
        positive(i, f"Added in version 3.{i}.", f"Nouveau dans la version 3.{i}.") for i in range(4)
    ]
    b = []
    for r in a:  # the same lines on another site: never candidates of the first
        r2 = dict(r, site="s2", id=stable_id("s2", r["id"]), pair_id="s2-" + r["pair_id"])
        b.append(r2)
    out = mine_divergences(table(b + a), SETTINGS, Recorder("mine"), encoder=toy_encoder)
    rows = out.to_pylist()
    by_id = {r["id"]: r for r in a + b}
    assert all(by_id[r["candidate_id"]]["site"] == r["site"] for r in rows)
    assert [r["positive_id"] for r in rows] == sorted(r["positive_id"] for r in rows)
    again = mine_divergences(table(a + b), SETTINGS, Recorder("mine"), encoder=toy_encoder)
    assert again.equals(out)  # independent of the input order


def test_hnsw_above_exact_max_finds_the_same_neighbours():
    rows = [
        positive(i, f"Added in version 3.{i}.", f"Nouveau dans la version 3.{i}.")
        for i in range(30)
    ]  # noqa: E501

    def random_encoder(texts):  # distinct similarities: no ties for the two searches to break
        import hashlib

        seeds = [int(hashlib.sha1(t.encode()).hexdigest()[:8], 16) for t in texts]
        return np.stack([np.random.default_rng(k).normal(size=32) for k in seeds])

    cfg = {**SETTINGS, "min_similarity": -1.0}
    exact = mine_divergences(table(rows), cfg, Recorder("mine"), encoder=random_encoder)
    rec = Recorder("mine")
    approx = mine_divergences(table(rows), {**cfg, "exact_max": 5}, rec, encoder=random_encoder)
    assert rec.counted("pools_hnsw") == 1
    assert set(approx.column("id").to_pylist()) == set(exact.column("id").to_pylist())


def test_search_spaces_and_the_surface_rerank():
    from parasim.mine.stage import Pool, rerank, search_space

    rng = np.random.default_rng(0)
    en, other = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    en /= np.linalg.norm(en, axis=1, keepdims=True)
    other /= np.linalg.norm(other, axis=1, keepdims=True)
    q, b = search_space(en, other, "both")
    assert np.allclose(q @ b.T, (en @ other.T + en @ en.T) / 2, atol=1e-6)
    assert (
        np.allclose(np.linalg.norm(q, axis=1), 1) and search_space(en, other, "cross")[1] is other
    )
    with pytest.raises(ValueError, match="mine.space"):
        search_space(en, other, "nope")
    texts = [
        "Renvoie la liste des fichiers.",
        "Renvoie la liste des dossiers.",
        "Tout autre chose.",
    ]
    pool = Pool("s", "en-fr", [{"other_text": t} for t in texts], *[[None] * 3] * 5)
    sims = np.array([[0.9, 0.7, 0.8]] * 3, dtype=np.float32)
    idx = np.array([[0, 2, 1]] * 3)
    s2, i2 = rerank(pool, sims, idx, 0.5)  # the look-alike of line 0 (line 1) comes first
    assert i2[0].tolist()[:2] == [0, 1] and s2[0][1] > s2[0][2]
    assert rerank(pool, sims, idx, 0.0)[1] is idx


def test_the_batched_rerank_is_the_per_candidate_definition():
    """Each candidate scored (1 - w) * similarity + w * Indel ratio / 100, sorted by score then
    line, empty slots last: the batch (cpdist) against a plain loop, ties and gaps included."""
    from rapidfuzz.fuzz import ratio

    from parasim.mine.stage import Pool, rerank

    rng = np.random.default_rng(3)
    words = ["la", "liste", "des", "fichiers", "dossiers", "version", "3.8", "3.9", "ajout", "dans"]
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 8))) for _ in range(60)]
    texts[1::4] = texts[0::4][: len(texts[1::4])]  # equal lines: equal ratios, ties by line
    pool = Pool("s", "en-fr", [{"other_text": t} for t in texts], *[[None] * 60] * 5)
    sims = np.round(rng.random((60, 9)), 1).astype(np.float32)
    idx = rng.integers(0, 60, size=(60, 9))
    idx[::3, -2:] = -1
    got_s, got_i = rerank(pool, sims, idx, 0.4)
    for i in range(60):
        want = sorted(
            ((0.6 * float(c) + 0.4 * ratio(texts[i], texts[j]) / 100, j)
             for c, j in zip(sims[i].tolist(), idx[i].tolist(), strict=True) if j >= 0),
            key=lambda t: (-t[0], t[1]),
        )  # fmt: skip
        n = len(want)
        assert got_i[i, :n].tolist() == [j for _, j in want]
        assert got_s[i, :n].tolist() == pytest.approx([s for s, _ in want], abs=1e-6)
        assert got_i[i, n:].tolist() == [-1] * (9 - n) and np.isneginf(got_s[i, n:]).all()


def test_centring_and_defaults_on_a_templated_pool():
    rows = [
        positive(i, f"Added in version 3.{i}.", f"Nouveau dans la version 3.{i}.") for i in range(6)
    ]  # noqa: E501
    rows.append(positive(6, "Click here", "Cliquez ici"))
    rec = Recorder("mine")
    out = mine_divergences(table(rows), {"min_similarity": 0.0}, rec, encoder=toy_encoder)
    got = out.to_pylist()
    assert got and all(r["kind"] == "version" for r in got)  # siblings, not "Click here"
    assert rec.stats().seconds["rerank"] >= 0


def test_empty_and_one_row_inputs_give_an_empty_valid_table():
    for rows in ([], [positive(0, "Click here", "Cliquez ici")]):
        rec = Recorder("mine")
        out = mine_divergences(table(rows), SETTINGS, rec, encoder=toy_encoder)
        assert out.num_rows == 0 and out.schema.equals(MINED_SCHEMA, check_metadata=False)


def test_differences_kinds():
    cases = {
        ("Nouveau dans la version 3.8.", "Nouveau dans la version 3.9."): "version",
        ("Publié le 3 mai 2017", "Publié le 4 juin 2017"): "date",
        ("Il y a 12 pages", "Il y a 15 pages"): "number",
        ("Voir os.path.join()", "Voir os.path.split()"): "name",
        ("Écrit par Marie", "Écrit par Jean"): "name",
        ("La liste des fichiers", "La liste des dossiers"): "other",
    }
    for (a, b), kind in cases.items():
        d = differences(a, b)
        assert d.kind == kind, (a, b, d)
        assert d.a_spans and d.b_spans
    assert differences("Même texte.", "même texte.").kind is None
    assert content_tokens("Les fichiers sont dans le dossier", "fr") == {"fichier", "dossier"}


def test_command_writes_the_table_and_stats(tmp_path, monkeypatch, capsys):
    from parasim import cli
    from parasim.mine import stage

    monkeypatch.setattr(stage, "load_mine_encoder", lambda s, static=None: toy_encoder)
    rows = [
        positive(i, f"Added in version 3.{i}.", f"Nouveau dans la version 3.{i}.") for i in range(3)
    ]  # noqa: E501
    write_table(table(rows[:2]), tmp_path / "a.parquet")
    write_table(table(rows[2:]), tmp_path / "b.parquet")
    out, stats = tmp_path / "mined.parquet", tmp_path / "stats.json"
    cli.main(
        ["mine-divergences", "--site", "s1", "--positives", str(tmp_path / "a.parquet"),
         str(tmp_path / "b.parquet"), "--out", str(out), "--stats", str(stats),
         "--settings-json", json.dumps(SETTINGS)]
    )  # fmt: skip
    assert pq.read_table(out).num_rows == 6
    st = json.loads(stats.read_text())
    assert st["stage"] == "mine" and st["rows_in"] == 3 and st["rows_out"] == 6
    rc = cli.main(["mine-divergences", "--positives", str(tmp_path / "nope.parquet"),
                   "--out", str(out)])  # fmt: skip
    assert rc != 0 and "positives shard not found" in capsys.readouterr().err


def test_settings_defaults():
    s = MineSettings.from_config({})
    assert s.encoder == "e5-static" and s.keep >= 1 and 0 < s.min_similarity < 1
