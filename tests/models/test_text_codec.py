"""A model folder's text codec (models/text_codec.py): GPT-2's vocab.json + merges.txt
give transformers' GPT2Tokenizer ids on the same files, tokenizer.json is read as it is,
a folder without tokenizer files reads bytes, and a tokenizer that cannot be read is
refused naming the missing file or package."""

import sys

import numpy as np
import pytest

from nntile_spmd.models.text_codec import TokenizerError, load_text_codec
from tests.models.gpt2_helpers import require_hf

TEXTS = ["def hello(name):\n    return 'hello ' + name\n",
         "  two  spaces,\n\n\ttabs <|endoftext|> é 日本 🙂 don't stop",
         "<|endoftext|>"]
CORPUS = "\n".join(TEXTS * 20) + "the quick brown fox jumps over the lazy dog " * 30


def write_bpe_files(folder):
    """vocab.json + merges.txt of a small byte-level BPE (320 entries) learned on CORPUS,
    no tokenizer.json (GPT-2's classic files)."""
    tokenizers = pytest.importorskip("tokenizers")
    learned = tokenizers.ByteLevelBPETokenizer()
    learned.train_from_iterator([CORPUS], vocab_size=320, min_frequency=2,
                                special_tokens=["<|endoftext|>"], show_progress=False)
    learned.save_model(str(folder))


@pytest.fixture(scope="module")
def bpe_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    write_bpe_files(folder)
    assert sorted(path.name for path in folder.iterdir()) == ["merges.txt", "vocab.json"]
    return folder


def test_vocab_and_merges_give_gpt2_tokenizers_ids(bpe_folder):
    _, transformers = require_hf()
    reference = transformers.GPT2Tokenizer(str(bpe_folder / "vocab.json"),
                                           str(bpe_folder / "merges.txt"))
    codec = load_text_codec(bpe_folder, 320)
    assert codec.source == "vocab.json + merges.txt"
    for text in TEXTS + [CORPUS]:
        ids = codec.encode(text)
        assert ids.dtype == np.int64 and ids.tolist() == reference.encode(text), text
        assert codec.decode(ids) == text
    assert len(codec.encode(CORPUS)) < len(CORPUS.encode()) / 2   # merged, not bytes


def test_tokenizer_json_is_read_as_it_is(bpe_folder, tmp_path):
    _, transformers = require_hf()
    reference = transformers.GPT2TokenizerFast(str(bpe_folder / "vocab.json"),
                                               str(bpe_folder / "merges.txt"))
    reference.save_pretrained(tmp_path)
    for name in ("vocab.json", "merges.txt"):   # only tokenizer.json is read
        (tmp_path / name).unlink(missing_ok=True)
    codec = load_text_codec(tmp_path, 320)
    assert codec.source == "tokenizer.json"
    assert codec.encode(TEXTS[1]).tolist() == reference.encode(TEXTS[1])


def test_no_tokenizer_file_reads_bytes(tmp_path):
    codec = load_text_codec(tmp_path, 256)
    assert codec.encode("hé").tolist() == list("hé".encode())
    assert codec.decode([104, 300, 105]) == "h?i"   # a sampled id beyond the bytes
    with pytest.raises(TokenizerError, match="vocabulary of 100 < 256"):
        load_text_codec(tmp_path, 100)


@pytest.mark.parametrize("present, named", [(["vocab.json"], "without merges.txt"),
                                            (["merges.txt"], "without vocab.json"),
                                            (["tokenizer.model"], "only tokenizer.model")])
def test_an_unreadable_tokenizer_is_refused_naming_the_file(tmp_path, present, named):
    for name in present:
        (tmp_path / name).write_text("{}")
    with pytest.raises(TokenizerError, match=named):
        load_text_codec(tmp_path, 50257)


def test_without_the_tokenizers_package_the_folder_is_refused(bpe_folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)   # import tokenizers fails
    with pytest.raises(TokenizerError, match="vocab.json: reading it needs the `tokenizers`"):
        load_text_codec(bpe_folder, 320)
