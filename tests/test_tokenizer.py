from gpt2.tokenizer import END_OF_TEXT, PROMPT, VOCAB_FILE, load_tokenizer

PROMPT_IDS = [15496, 11, 314, 1101, 257, 3303, 2746, 11]


def test_prompt_encodes_to_gpt2_ids():
    assert load_tokenizer().encode(PROMPT) == PROMPT_IDS


def test_decoding_round_trips():
    tok = load_tokenizer()
    for text in (PROMPT, "  leading spaces, émigré café, 12345 and\nnew lines\t", "it's we've they'll"):
        assert tok.decode(tok.encode(text)) == text


def test_vocabulary_is_gpt2s():
    tok = load_tokenizer()
    assert tok.n_vocab == 50257
    assert tok.encode("<|endoftext|>", allowed_special="all") == [END_OF_TEXT]
    assert VOCAB_FILE.stat().st_size == 835554  # the vendored file, unchanged
