"""Tests for parasim.translate: cache, retries, chunking, the stage function and the backends."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import sys
import types
from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa
import pytest

from parasim import stages
from parasim.config import ConfigError
from parasim.io import LINES_SCHEMA, TRANSLATED_SCHEMA, read_table, rows_to_table, write_table
from parasim.stats import Recorder, Stats
from parasim.translate import (
    BackendUnavailable,
    TranslateSettings,
    TranslationCache,
    TranslationError,
    Translator,
    available_backends,
    make_translator,
    normalize_line,
    register_backend,
    split_long,
)
from parasim.translate import stage as stage_mod
from parasim.translate import translate_file as _translate_file
from parasim.translate import translate_lines as _translate_lines
from parasim.translate import translate_texts as _translate_texts

HAS_APERTIUM = shutil.which("apertium") is not None


def translate_texts(texts, lang, backend, cache=None, log=None) -> tuple[list, Stats]:
    """:func:`parasim.translate.translate_texts`: its lines and the stats it recorded."""
    rec = Recorder("translate")
    out = _translate_texts(texts, lang, backend, cache, log, rec=rec)
    return out, rec.stats()


def translate_lines(table, backend, cache, log=None) -> tuple[pa.Table, Stats]:
    """The stage function on ``table``: its table and the stats it recorded."""
    rec = Recorder("translate")
    out = _translate_lines(table, backend, cache, log, rec=rec)
    return out, rec.stats()


needs_apertium = pytest.mark.skipif(not HAS_APERTIUM, reason="apertium binary not installed")


class FakeMT(Translator):
    """Uppercases lines; can fail the first calls, on a poison word, or answer empty."""

    name = "fake"
    default_batch_size = 4

    def __init__(
        self, cfg=None, threads=None, fail_times=0, poison=None, empty=(), langs=("fr", "es")
    ):
        if not isinstance(cfg, TranslateSettings):
            cfg = {"backoff_s": 0.5, **(cfg or {})}
        super().__init__(cfg, threads)
        self.fail_times = fail_times
        self.poison = poison
        self.empty = set(empty)
        self.langs = set(langs)
        self.calls: list[list[str]] = []

    def supports(self, src_lang: str) -> bool:
        return src_lang in self.langs

    def model_id(self, src_lang: str) -> str:
        return "v1"

    def translate_batch(self, lines: Sequence[str], src_lang: str) -> list[str | None]:
        self.calls.append(list(lines))
        if self.fail_times > 0:
            self.fail_times -= 1
            raise TranslationError("network down")
        if self.poison and any(self.poison in line for line in lines):
            raise TranslationError("backend crashed")
        return ["" if line in self.empty else line.upper() for line in lines]


@pytest.fixture
def sleeps(monkeypatch):
    """Record back-off delays instead of sleeping."""
    delays: list[float] = []
    monkeypatch.setattr(stage_mod, "_sleep", delays.append)
    return delays


def _lines_row(pair_id: str, lang: str, other: list[str]) -> dict:
    return {
        "pair_id": pair_id, "site": "s", "domain": "d", "lang_pair": f"en-{lang}",
        "en_url": f"https://x/{pair_id}-en", "other_url": f"https://x/{pair_id}-{lang}",
        "other_lang": lang, "en_lines": [f"e{i}" for i in range(len(other))],
        "other_lines": other, "n_en": len(other), "n_other": len(other),
        "equal_lines": True, "selector_used": False,
    }  # fmt: skip


# ---------------------------------------------------------------- cache


def test_cache_hits_keys_and_persistence(tmp_path):
    path = tmp_path / "cache" / "t.sqlite"
    with TranslationCache(path) as cache:
        assert cache.put_many("apertium", "m1", "fr", {"chat": "cat", "chien": "dog"}) == 2
        assert cache.put_many("apertium", "m1", "fr", {"chat": "CAT"}) == 0  # first answer wins
        assert cache.get_many("apertium", "m1", "fr", ["chat", "oiseau", "chat"]) == {"chat": "cat"}
        assert (cache.hits, cache.misses) == (1, 1)
        assert cache.get("apertium", "m2", "fr", "chat") is None  # model is part of the key
        assert cache.get("apertium", "m1", "es", "chat") is None  # so is the language
        assert cache.get("marian", "m1", "fr", "chat") is None  # and the backend
    with TranslationCache(path) as again:
        assert again.get("apertium", "m1", "fr", "chien") == "dog"
        assert len(again) == 2
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode.lower() == "wal"


def _write_many(path: str, worker: int, n: int) -> None:
    with TranslationCache(path) as cache:
        for start in range(0, n, 10):
            # Overlapping keys: every worker writes the shared ones too.
            pairs = {f"line {i}": f"en {i}" for i in range(start, start + 10)}
            pairs[f"own {worker} {start}"] = f"w{worker}"
            cache.put_many("fake", "v1", "fr", pairs)


def test_cache_concurrent_writers(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_many, args=(path, w, 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with TranslationCache(path) as cache:
        assert len(cache) == 200 + 4 * 20
        got = cache.get_many("fake", "v1", "fr", [f"line {i}" for i in range(200)])
        assert got == {f"line {i}": f"en {i}" for i in range(200)}


# ---------------------------------------------------------------- text helpers


def test_normalize_line():
    assert normalize_line("  Le\tchat\r\nest\u2028noir\x00 ") == "Le chat est noir"
    assert normalize_line("\ufeffmot\u00adcoupé") == "motcoupé"
    assert normalize_line(None) == ""


def test_split_long_on_sentences_then_spaces():
    text = "Une phrase courte. " * 30 + "x" * 250
    chunks = split_long(text.strip(), 100)
    assert all(len(c) <= 100 for c in chunks)
    assert chunks[0].startswith("Une phrase courte. Une phrase courte.")
    assert chunks[0].endswith(".")  # cut at a sentence end
    assert "".join(chunks).replace(" ", "") == text.replace(" ", "")  # nothing lost
    assert split_long("court", 100) == ["court"]


# ---------------------------------------------------------------- retries and failures


def test_retry_with_exponential_backoff_then_success(sleeps):
    be = FakeMT({"retries": 3}, fail_times=2)
    out, st = translate_texts(["un", "deux"], "fr", be)
    assert out == ["UN", "DEUX"]
    assert sleeps == [0.5, 1.0]
    assert st.counts["retries"] == 2 and st.counts["untranslated"] == 0


def test_failure_marks_untranslated_and_backend_taken_as_down(sleeps):
    be = FakeMT({"retries": 2, "batch_size": 2, "give_up_after": 2}, fail_times=10**6)
    texts = [f"ligne {i}" for i in range(10)]
    out, st = translate_texts(texts, "fr", be)
    assert out == [None] * 10
    assert st.counts["untranslated"] == 10
    by = st.counts["untranslated_by_reason"]
    assert by["backend_error"] + by["backend_unavailable"] == 10
    assert by["backend_unavailable"] == 6  # no calls once the backend is taken as down
    # give_up_after batches, each tried 1 + retries times, then each half once
    assert len(be.calls) == 2 * (3 + 2)
    assert sleeps[:2] == [0.5, 1.0]


def test_poison_line_is_isolated(sleeps):
    be = FakeMT({"retries": 1, "batch_size": 64, "give_up_after": 1}, poison="BOOM")
    texts = [f"ligne {i}" for i in range(40)] + ["c BOOM"] + [f"fin {i}" for i in range(20)]
    out, st = translate_texts(texts, "fr", be)
    assert out == [t.upper() for t in texts[:40]] + [None] + [t.upper() for t in texts[41:]]
    assert st.counts["untranslated_by_reason"]["backend_error"] == 1
    assert sleeps == [0.5]  # back-off for the batch, none while halving
    assert len(be.calls) <= 2 + 2 * 6  # log2(61) levels of halving


def test_empty_output_is_a_failure_and_not_cached(tmp_path, sleeps):
    path = tmp_path / "c.sqlite"
    with TranslationCache(path) as cache:
        out, st = translate_texts(["oui", "non"], "fr", FakeMT(empty={"non"}), cache)
    assert out == ["OUI", None]
    assert st.counts["untranslated_by_reason"]["empty_output"] == 1
    assert sleeps == []  # deterministic backend: an empty answer is not retried
    with TranslationCache(path) as cache:
        be = FakeMT()
        out, st = translate_texts(["oui", "non"], "fr", be, cache)
    assert out == ["OUI", "NON"]
    assert be.calls == [["non"]]  # only the failed line is tried again
    assert (st.counts["cache_hits"], st.counts["translated"]) == (1, 1)


def test_cache_committed_after_each_batch(tmp_path):
    class Killed(BaseException):
        pass

    class DiesOnSecondBatch(FakeMT):
        def translate_batch(self, lines, src_lang):
            if self.calls:
                raise Killed
            return super().translate_batch(lines, src_lang)

    path = tmp_path / "c.sqlite"
    texts = [f"l{i}" for i in range(6)]
    with pytest.raises(Killed), TranslationCache(path) as cache:
        translate_texts(texts, "fr", DiesOnSecondBatch({"batch_size": 3}), cache)
    with TranslationCache(path) as cache:
        assert cache.get_many("fake", "v1", "fr", texts) == {f"l{i}": f"L{i}" for i in range(3)}


def test_long_lines_chunked_or_refused():
    be = FakeMT({"max_chars": 50, "max_line_chars": 500, "batch_size": 100})
    long_ok = "Phrase numéro un. " * 10
    too_long = "x " * 400
    out, st = translate_texts([long_ok, too_long], "fr", be)
    assert out[0] == " ".join(c.upper() for c in split_long(normalize_line(long_ok), 50))
    assert out[1] is None
    assert st.counts["lines_chunked"] == 1
    assert st.counts["untranslated_by_reason"]["too_long"] == 1
    assert max(len(u) for u in be.calls[0]) <= 50


# ---------------------------------------------------------------- the stage function


def test_translate_lines_table(tmp_path, sleeps):
    rows = [
        _lines_row("p1", "fr", ["Bonjour", "", "12,50 €", "Menu", "BOOM ici"]),
        _lines_row("p2", "fr", ["Menu", "Au revoir"]),  # "Menu" again: translated once
        _lines_row("p3", "en", ["Already English", ""]),
        _lines_row("p4", "es", []),
        _lines_row("p5", "de", ["Guten Tag", ""]),  # the backend cannot do German
    ]
    table = rows_to_table(rows, LINES_SCHEMA)
    be = FakeMT({"retries": 1, "give_up_after": 5}, poison="BOOM")
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        out, st = translate_lines(table, be, cache)
    assert out.schema.equals(TRANSLATED_SCHEMA, check_metadata=True)
    assert out.column("pair_id").to_pylist() == ["p1", "p2", "p3", "p4", "p5"]
    assert out.column("other_en_lines").to_pylist() == [
        ["BONJOUR", "", "12,50 €", "MENU", None],
        ["MENU", "AU REVOIR"],
        ["Already English", ""],
        [],
        [None, ""],
    ]
    assert out.column("n_untranslated").to_pylist() == [1, 0, 0, 0, 1]
    assert out.column("mt_backend").to_pylist() == [
        "fake:v1", "fake:v1", "identity", "fake:v1", "fake:v1"
    ]  # fmt: skip
    assert sum(len(c) for c in be.calls if "BOOM ici" not in c) >= 3
    assert st.rows_in == 5 and st.counts["rows_identity"] == 1
    assert st.counts["lines_empty"] == 2 and st.counts["lines_passthrough"] == 1
    assert st.counts["untranslated"] == 2
    assert st.counts["untranslated_by_reason"]["unsupported_lang"] == 1
    assert st.counts["untranslated_by_reason"]["backend_error"] == 1
    assert st.counts["units_unique"] == 4  # Bonjour, Menu, BOOM ici, Au revoir
    assert st.counts["lines_translated"] == 4  # Bonjour, Menu, Menu, Au revoir (3 units translated)
    # the stage's stats: rows pass through; untranslated lines are counted, not dropped
    assert (st.rows_in, st.rows_out, st.n_dropped) == (5, 5, 0)
    assert st.figures["mt_backend"] == "fake" and st.site is None
    assert not stages.get("translate").empty(st)

    # A rerun: everything that worked comes from the cache; only the failed line is retried.
    be2 = FakeMT()
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        out2, st2 = translate_lines(table, be2, cache)
    assert be2.calls == [["BOOM ici"]]
    assert st2.counts["cache_hits"] == 3 and st2.counts["translated"] == 1
    assert st2.counts["lines_translated"] == 5  # what came out translated, wherever it came from
    assert out2.column("n_untranslated").to_pylist() == [0, 0, 0, 0, 1]
    # And a third run translates nothing at all.
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        _, st3 = translate_lines(table, FakeMT(), cache)
    assert st3.counts["translated"] == 0 and st3.figures["cache_hit_rate"] == 1.0
    assert st3.counts["lines_translated"] == 5


def test_translate_lines_empty_table_and_bad_input():
    empty = LINES_SCHEMA.empty_table()
    out, st = translate_lines(empty, FakeMT(), None)
    assert out.num_rows == 0 and out.schema.equals(TRANSLATED_SCHEMA)
    assert st.counts["lines"] == 0
    with pytest.raises(ValueError, match="other_lines"):
        translate_lines(pa.table({"pair_id": ["x"]}), FakeMT(), None)


def test_translate_file_roundtrip_with_identity(tmp_path):
    src = tmp_path / "lines.parquet"
    write_table(rows_to_table([_lines_row("p1", "fr", ["Un", "Deux"])], LINES_SCHEMA), src)
    dst = tmp_path / "translated" / "0.parquet"
    rec = Recorder("translate")
    _translate_file(src, dst, {"backend": "identity"}, tmp_path / "c.sqlite", rec=rec)
    stats = rec.stats().counts
    got = read_table(dst)
    assert got.column("other_en_lines").to_pylist() == [["Un", "Deux"]]
    assert got.column("mt_backend").to_pylist() == ["identity"]
    assert stats["translated"] == 2


def test_make_translator_registry():
    assert {"apertium", "marian", "mtranslate", "identity"} <= set(available_backends())
    settings = TranslateSettings.from_config({"batch_size": 7, "retries": 0})
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        make_translator(replace(settings, backend="nope"))
    with pytest.raises(ConfigError, match="translate.backend: 'nope' is not one of"):
        make_translator({"backend": "nope"})
    register_backend("fake-test", FakeMT)
    be = make_translator(replace(settings, backend="fake-test"), threads=2)
    assert isinstance(be, FakeMT) and be.batch_size == 7 and be.retries == 0
    assert be.backoff_s == 1.0 and be.threads == 2  # the schema's default, not FakeMT's own
    with pytest.raises(ValueError, match="batch_size"):
        make_translator({"backend": "identity", "batch_size": 0})


# ---------------------------------------------------------------- mtranslate (mocked: no internet)


def _fake_mtranslate(monkeypatch, fn):
    mod = types.ModuleType("mtranslate")
    mod.translate = fn
    monkeypatch.setitem(sys.modules, "mtranslate", mod)


def test_mtranslate_network_down(monkeypatch, sleeps):
    def down(text, to_language="auto", from_language="auto"):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    _fake_mtranslate(monkeypatch, down)
    cfg = {"backend": "mtranslate", "retries": 2, "give_up_after": 1, "batch_size": 2}
    be = make_translator(cfg)
    out, st = translate_texts(["Bonjour", "Merci", "Salut", "Oui"], "fr", be)
    assert out == [None] * 4
    assert st.counts["untranslated_by_reason"]["backend_error"] == 2  # the first batch, tried
    assert st.counts["untranslated_by_reason"]["backend_unavailable"] == 2  # then no more calls
    assert sleeps == [1.0, 2.0]
    assert st.counts["backend_calls"] == 3 + 2


def test_mtranslate_refusal_is_retried_then_works(monkeypatch, sleeps):
    answers = iter(["", "Hello"])  # Google answers "" when it refuses a request

    def flaky(text, to_language="auto", from_language="auto"):
        assert (to_language, from_language) == ("en", "fr")
        return next(answers)

    _fake_mtranslate(monkeypatch, flaky)
    be = make_translator({"backend": "mtranslate", "retries": 2})
    out, st = translate_texts(["Bonjour"], "fr", be)
    assert out == ["Hello"] and st.counts["retries"] == 1
    assert be.label("fr") == "mtranslate:google-web"


def test_mtranslate_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "mtranslate", None)  # import raises ImportError
    with pytest.raises(BackendUnavailable, match="pip install mtranslate"):
        make_translator({"backend": "mtranslate"})


# ---------------------------------------------------------------- apertium (real, offline)


@needs_apertium
def test_apertium_french_and_spanish():
    be = make_translator({"backend": "apertium"})
    assert be.chain("es") == ["spa-eng"]
    assert be.chain("fr")[-1] == "spa-eng" and len(be.chain("fr")) == 2
    assert not be.supports("xx")
    with pytest.raises(BackendUnavailable, match="no-such-mode"):
        make_translator({"backend": "apertium", "apertium_modes": {"fr": ["no-such-mode"]}})
    fr = [
        "Le chat est noir.",
        "",
        "Prix : <b>12 €</b> & [note] \\ {x} ^a$ / *b @c #d",
        "La maison\nrouge est grande",
        "12:30",
        "Nous avons une nouvelle voiture.",
    ]
    out, st = translate_texts(fr, "fr", be)
    assert len(out) == len(fr)
    assert "cat" in out[0].lower() and "black" in out[0].lower()
    assert out[1] == "" and out[4] == "12:30"
    assert out[2] and "12 €" in out[2]
    assert "house" in out[3].lower() and "\n" not in out[3]
    assert "car" in out[5].lower()
    assert st.counts["untranslated"] == 0
    es, _ = translate_texts(["El perro es grande.", "Gracias por su ayuda."], "es", be)
    assert "dog" in es[0].lower() and "thank" in es[1].lower()
    assert not any(m in t for t in es for m in "*#@")


@needs_apertium
def test_apertium_resplits_on_wrong_line_count(monkeypatch):
    be = make_translator({"backend": "apertium"})
    lines = ["El perro es grande.", "La casa es roja.", "Me gusta el café."]
    want = be.translate_batch(lines, "es")
    real_call = be._call

    def lossy(batch, mode):  # loses a paragraph whenever it gets more than one line
        parts = real_call(batch, mode)
        return parts[:-1] if len(batch) > 1 else parts

    monkeypatch.setattr(be, "_call", lossy)
    assert be.translate_batch(lines, "es") == want
    assert be.n_resplit >= 2


# ---------------------------------------------------------------- marian (tiny random model)


@pytest.fixture(scope="module")
def tiny_marian(tmp_path_factory):
    """A randomly initialised 1-layer MarianMT with a sentencepiece tokenizer, saved to disk."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spm = pytest.importorskip("sentencepiece")
    import io
    import json

    d = tmp_path_factory.mktemp("marian")
    text = ["Bonjour le monde.", "Le chat est noir.", "Hola mundo.", "Hello world, the cat."] * 3
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=buf, vocab_size=40, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, bos_id=-1, eos_id=-1, unk_id=0,
        minloglevel=2,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    for name in ("source.spm", "target.spm"):
        (d / name).write_bytes(buf.getvalue())
    vocab = {"</s>": 0, "<unk>": 1, "<pad>": 2}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (d / "vocab.json").write_text(json.dumps(vocab))
    tok = transformers.MarianTokenizer(
        *(str(d / n) for n in ("source.spm", "target.spm", "vocab.json"))
    )
    tok.save_pretrained(d)
    cfg = transformers.MarianConfig(
        vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=2, eos_token_id=0,
        decoder_start_token_id=2, forced_eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MarianMTModel(cfg)
    # Make one known word win every decoding step, so the output is predictable.
    word = max((p for p in vocab if p.lstrip("▁").isalpha()), key=lambda p: len(p.lstrip("▁")))
    with torch.no_grad():
        model.final_logits_bias[0, vocab[word]] = 1000.0
    model.save_pretrained(d)
    return d, word.lstrip("▁")


def test_marian_tiny_model(tiny_marian):
    path, word = tiny_marian
    be = make_translator(
        {"backend": "marian", "model": {"fr": str(path)}, "batch_size": 2, "max_new_tokens": 4}
    )
    assert be.supports("fr") and not be.supports("de")
    assert be.label("fr") == f"marian:{path}"
    long_line = "Le chat est noir. " * 20  # more tokens than the model has positions (64)
    lines = ["Le chat est noir.", "Bonjour", "Le monde, le chat et le chien sont là.", long_line]
    out, st = translate_texts(lines, "fr", be)
    assert len(out) == 4 and st.counts["untranslated"] == 0 and st.counts["retries"] == 0
    assert all(o.startswith(word) for o in out)
    assert be.device.type in ("cpu", "cuda")


def test_marian_missing_model_is_a_clear_error(tmp_path):
    pytest.importorskip("transformers")
    be = make_translator({"backend": "marian", "model": str(tmp_path / "no-model")})
    with pytest.raises(BackendUnavailable, match="no-model"):
        translate_texts(["Bonjour"], "fr", be)
