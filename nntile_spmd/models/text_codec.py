"""Models layer: text <-> token ids for a local Hugging Face model folder.

The folder's tokenizer files, read with the `tokenizers` package (installed with
transformers; `pip install tokenizers` alone): tokenizer.json as it is, or GPT-2's
classic pair vocab.json + merges.txt as a byte-level BPE (what transformers'
GPT2Tokenizer reads them as). A folder with no tokenizer file at all reads text as
bytes (ids 0-255; the docs' tiny models have that vocabulary). Anything else is
refused before any training, naming the file or package that is missing: reading a
folder's text as bytes when it has a tokenizer of its own would train on wrong ids.
"""

from __future__ import annotations

import json
from pathlib import Path

TOKENIZER_JSON = "tokenizer.json"
BPE_PAIR = ("vocab.json", "merges.txt")
SENTENCEPIECE = "tokenizer.model"
# GPT2Tokenizer's default unk, bos and eos token: one id where its text appears, not bytes
GPT2_SPECIAL = "<|endoftext|>"


class TokenizerError(ValueError):
    """A folder whose tokenizer cannot be read (the file or package named)."""


class TextCodec:
    """encode(text) -> int64 ids, decode(ids) -> text; `source` says what it reads."""

    def __init__(self, tokenizer=None, source="bytes"):
        self.tokenizer, self.source = tokenizer, source

    def encode(self, text: str):
        import numpy as np
        if self.tokenizer is not None:
            return np.array(self.tokenizer.encode(text).ids, dtype=np.int64)
        return np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)

    def decode(self, ids) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)
        # a vocabulary larger than the bytes can sample an id that is no byte
        return bytes(int(i) if 0 <= int(i) < 256 else ord("?") for i in ids).decode(
            errors="replace")


def tokenizers_module(folder, file_name):
    try:
        import tokenizers
    except ImportError as missing:
        raise TokenizerError(f"{Path(folder) / file_name}: reading it needs the `tokenizers` "
                             "package (pip install tokenizers; transformers installs it)"
                             ) from missing
    return tokenizers


def byte_level_bpe(folder):
    """vocab.json + merges.txt as GPT2Tokenizer reads them: byte-level BPE, the GPT-2
    split of words, no prefix space, <|endoftext|> one token where the vocabulary has it."""
    tokenizers = tokenizers_module(folder, BPE_PAIR[0])
    vocab, merges = (str(Path(folder) / name) for name in BPE_PAIR)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(vocab, merges))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    if GPT2_SPECIAL in json.loads(Path(vocab).read_text(encoding="utf-8")):
        tokenizer.add_special_tokens([GPT2_SPECIAL])
    return tokenizer


def load_text_codec(folder, vocab_size: int) -> TextCodec:
    """The codec of model folder `folder` (whose vocabulary has `vocab_size` entries)."""
    folder = Path(folder)
    if (folder / TOKENIZER_JSON).is_file():
        tokenizers = tokenizers_module(folder, TOKENIZER_JSON)
        return TextCodec(tokenizers.Tokenizer.from_file(str(folder / TOKENIZER_JSON)),
                         TOKENIZER_JSON)
    present = [name for name in BPE_PAIR if (folder / name).is_file()]
    if len(present) == len(BPE_PAIR):
        return TextCodec(byte_level_bpe(folder), " + ".join(BPE_PAIR))
    if present:
        missing = next(name for name in BPE_PAIR if name not in present)
        raise TokenizerError(f"{folder}: {present[0]} without {missing} (a byte-level BPE "
                             f"tokenizer needs both), and no {TOKENIZER_JSON}")
    if (folder / SENTENCEPIECE).is_file():
        raise TokenizerError(f"{folder}: only {SENTENCEPIECE} (SentencePiece), which is not "
                             f"read here; save the tokenizer's {TOKENIZER_JSON} beside it "
                             "(transformers' tokenizer.save_pretrained writes one)")
    if vocab_size < 256:
        raise TokenizerError(f"{folder}: no tokenizer file ({TOKENIZER_JSON}, or "
                             f"{' + '.join(BPE_PAIR)}) and a vocabulary of {vocab_size} < 256 "
                             "entries, too small for bytes")
    return TextCodec()
