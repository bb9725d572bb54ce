"""Shared test fixtures (keep small)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: ../shared/data relative to the repository root; absent in a user's fresh clone.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


#: Markers of the tests the fast lane (plain `pytest -q`) leaves out; `pytest --all` runs them.
LANE_MARKERS = ("slow", "shared_data", "slurm")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        default=False,
        help="also run the slow, real-data (../shared/data) and SLURM tests (CI runs them all)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast lane: leave out slow, real-data and SLURM tests unless `--all` or `-m` is given.

    A test that asks for the ``shared_data`` fixture is a real-data test even without the marker.
    """
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.shared_data)
    if config.getoption("--all") or config.getoption("markexpr"):
        return
    keep, left_out = [], []
    for item in items:
        marked = any(item.get_closest_marker(m) for m in LANE_MARKERS)
        (left_out if marked else keep).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = keep
        config._parasim_lane_left_out = len(left_out)  # for the summary line below


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    n = getattr(config, "_parasim_lane_left_out", 0)
    if n:
        terminalreporter.write_line(
            f"fast lane: {n} slow, real-data or SLURM tests left out; `pytest --all` runs them"
        )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real-data folder; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


#: The toy words of tests/train/test_ranker.py's word-level tiny model.
TOY_WORDS = [f"w{i}" for i in range(24)]


def make_tiny_bert(d: Path, chars: bool = False) -> str:
    """A random 2-layer BERT (hidden 32) and a fast tokenizer, saved to ``d``; returns ``d``.

    ``chars=False``: a WordLevel tokenizer over the toy words ``w0..w23`` and ``fw0..fw23``
    (tests/train/test_ranker.py). ``chars=True``: a character-level WordPiece tokenizer (every
    printable Latin-1 character, word-initial and ``##`` continuation), so real text of any
    of the demo languages gets real ids (the workflow tests train the ranker on the demo).
    Seeded: the same folder every time. Nothing is downloaded.
    """
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    if chars:
        alphabet = [chr(c) for c in range(33, 256) if chr(c).isprintable()]
        vocab = {w: i for i, w in enumerate(specials + alphabet + [f"##{c}" for c in alphabet])}
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    else:
        vocab = {w: i for i, w in enumerate(specials + TOY_WORDS + [f"f{w}" for w in TOY_WORDS])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]",
    )  # fmt: skip
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512 if chars else 64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    BertModel(cfg).save_pretrained(d)
    return str(d)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """:func:`make_tiny_bert` over the toy words (tests/train/test_ranker.py)."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def site_run(tmp_path_factory):
    """The fixture site run once from scratch with ``--cores 2`` (tests/workflow/runs.py), for
    the workflow tests that read a finished run: one run instead of one per test. Read-only: a
    test that changes a run makes its own."""
    from runs import local_run  # tests/workflow (on sys.path once collected)

    return local_run(tmp_path_factory.mktemp("site") / "run")


@pytest.fixture(scope="session")
def second_site_run(tmp_path_factory):
    """A second run of the fixture site from scratch, for the tests that compare two runs:
    through the one-node SLURM cluster where one answers (CI), else locally."""
    from runs import local_run, slurm_run, slurm_unavailable

    work = tmp_path_factory.mktemp("second") / "run"
    return slurm_run(work) if slurm_unavailable() is None else local_run(work)


@pytest.fixture
def slurm_cluster() -> None:
    """Skips (or fails, with PARASIM_REQUIRE_SLURM=1) unless a SLURM cluster answers."""
    from runs import slurm_unavailable

    reason = slurm_unavailable()
    if reason is None:
        return
    if os.environ.get("PARASIM_REQUIRE_SLURM") == "1":
        pytest.fail(f"PARASIM_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)
