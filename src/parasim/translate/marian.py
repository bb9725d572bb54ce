"""MarianMT, or any sequence-to-sequence model ``transformers`` can load, by hub name or local path.

transformers 5 has no translation pipeline: the batch is tokenised and ``model.generate`` is called
directly. One model per source language (``model: {fr: Helsinki-NLP/opus-mt-fr-en, ...}``), or one
many-to-English model for all (``model: path/to/model``). Runs on CUDA when present
(``device: auto``), else on CPU. Needs ``torch``, ``transformers`` and, for Marian tokenisers,
``sentencepiece``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from parasim.translate.base import BackendUnavailable, TranslateSettings, Translator

#: Used for a language the ``model`` mapping does not name.
DEFAULT_MODEL = "Helsinki-NLP/opus-mt-{lang}-en"


class MarianTranslator(Translator):
    """Batched seq2seq translation with ``AutoModelForSeq2SeqLM`` + ``AutoTokenizer``.

    Settings (besides the common ones): ``model`` (a name/path, a {lang: name/path} mapping,
    or None for :data:`DEFAULT_MODEL`), ``device`` (auto, cpu, cuda, cuda:N), ``num_beams``
    (1: greedy), ``max_new_tokens``, ``max_input_tokens`` (longer inputs are truncated),
    ``dtype`` (auto: float16 on CUDA, float32 on CPU; or float32/float16/bfloat16),
    and ``threads`` (CPU threads for torch).

    Models are loaded on first use of their language, so a config naming five languages costs
    nothing for the ones a shard does not contain.
    """

    name: ClassVar[str] = "marian"
    default_batch_size: ClassVar[int] = 32
    batch_chars: ClassVar[int] = 50_000

    def __init__(
        self,
        settings: TranslateSettings | Mapping[str, Any] | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(settings, threads)
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise BackendUnavailable(
                f"translate.backend marian needs torch and transformers ({exc})"
            ) from exc
        s = self.settings
        self.models_cfg = s.model
        self.device_cfg = str(s.device)
        self.num_beams = int(s.num_beams)
        self.max_new_tokens = int(s.max_new_tokens)
        self.max_input_tokens = int(s.max_input_tokens)
        self.dtype_cfg = str(s.dtype)
        self._loaded: dict[str, tuple[Any, Any]] = {}  # model name -> (tokenizer, model)
        self._device = None

    def model_name(self, src_lang: str) -> str:
        """The model (hub name or local path) used for ``src_lang``."""
        m = self.models_cfg
        if isinstance(m, Mapping):
            return str(m.get(src_lang) or DEFAULT_MODEL.format(lang=src_lang))
        return str(m) if m else DEFAULT_MODEL.format(lang=src_lang)

    def supports(self, src_lang: str) -> bool:
        m = self.models_cfg
        return not isinstance(m, Mapping) or not m or src_lang in m

    def model_id(self, src_lang: str) -> str:
        # Decoding settings change the output, so they are part of the cache key.
        return f"{self.model_name(src_lang)}|beams={self.num_beams}|max={self.max_new_tokens}"

    def label(self, src_lang: str) -> str:
        return f"marian:{self.model_name(src_lang)}"

    @property
    def device(self):
        """The torch device: CUDA when ``device: auto`` and a GPU is present, else CPU."""
        if self._device is None:
            import torch

            if self.threads:
                torch.set_num_threads(int(self.threads))
            want = self.device_cfg
            if want == "auto":
                want = "cuda" if torch.cuda.is_available() else "cpu"
            self._device = torch.device(want)
        return self._device

    def _load(self, src_lang: str) -> tuple[Any, Any]:
        name = self.model_name(src_lang)
        if name not in self._loaded:
            import torch
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

            dtype = self.dtype_cfg
            if dtype == "auto":
                dtype = "float16" if self.device.type == "cuda" else "float32"
            try:
                tok = AutoTokenizer.from_pretrained(name)
                model = AutoModelForSeq2SeqLM.from_pretrained(name, dtype=getattr(torch, dtype))
            except (OSError, ValueError, ImportError) as exc:
                raise BackendUnavailable(
                    f"translate.model: cannot load {name!r} for {src_lang!r} "
                    f"(no such local path, no hub access, or a missing tokenizer package): {exc}"
                ) from exc
            model.to(self.device).eval()
            self._loaded[name] = (tok, model)
        return self._loaded[name]

    def translate_batch(self, lines: Sequence[str], src_lang: str) -> list[str | None]:
        """Translate in sub-batches of ``batch_size``, longest first (less padding)."""
        import torch

        tok, model = self._load(src_lang)
        # Never ask for more positions than the model has (an IndexError on every long line).
        positions = int(getattr(model.config, "max_position_embeddings", 0) or 10**6)
        tok_max = int(getattr(tok, "model_max_length", 0) or 10**6)
        max_in = min(self.max_input_tokens, positions, tok_max)
        max_new = min(self.max_new_tokens, positions - 1)
        order = sorted(range(len(lines)), key=lambda i: -len(lines[i]))
        out: list[str | None] = [None] * len(lines)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = tok(
                [lines[i] for i in idx],
                return_tensors="pt", padding=True, truncation=True,
                max_length=max_in,
            )  # fmt: skip
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode():
                gen = model.generate(
                    **enc,
                    num_beams=self.num_beams,
                    do_sample=False,
                    max_new_tokens=max_new,
                )
            for i, text in zip(idx, tok.batch_decode(gen, skip_special_tokens=True), strict=True):
                out[i] = " ".join(text.split())
        return out

    def close(self) -> None:
        self._loaded.clear()
