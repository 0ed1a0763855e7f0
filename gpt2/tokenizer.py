"""GPT-2's byte-pair encoding through tiktoken, from the vocabulary vendored in gpt2/data/
(no download)."""
from __future__ import annotations

from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

VOCAB_FILE = Path(__file__).resolve().parent / "data" / "gpt2.tiktoken"
END_OF_TEXT = 50256
# GPT-2's pre-tokenisation pattern.
SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PROMPT = "Hello, I'm a language model,"


def load_tokenizer() -> tiktoken.Encoding:
    ranks = load_tiktoken_bpe(str(VOCAB_FILE))
    return tiktoken.Encoding(name="gpt2-vendored", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": END_OF_TEXT})
