"""Reference ids from Hugging Face `tokenizers` for hwtrain's byte-level BPE (tests/data/hf_bpe_tokenizer_test.cpp):
trains three small tokenizers on generated mixed text (GPT-2 style: ByteLevel with its regex; Llama 3
style: a Split regex then ByteLevel, ignore_merges; Qwen2 style: NFC, then its Split regex and ByteLevel), saves each tokenizer.json in OUT/<style>/, and
the ids of a held-out text (Unicode, whitespace runs, digits, special tokens, the added non-special
tokens <think> and </think>) as OUT/<style>.ids
(int32 little-endian), the text as OUT/text.txt, and tokenizers' single-thread encode seconds as
OUT/<style>.seconds. Usage: hf_tokenizers_reference.py OUT_DIR [TEXT_MEGABYTES]"""
import os
import random
import sys
import time

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                 r"|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
WORDS = ("the quick brown fox jumps over lazy dog hello world tokenizer training model data don't it's we're "
         "they've I'm you'll he'd café naïve über straße 東京 中文 字符 привет мир γειά σου 😀 🚀 👍🏽 "
         "x86_64 foo_bar camelCase HTTP/2 e-mail a.b.c 3.14159 2026-11-25 1,000,000 $42 100% #tag @user "
         "cafe\u0301 A\u030angstro\u0308m \u1100\u1161\u11a8 \u212b \ufb01ne").split()  # decomposed forms: NFC changes them


def make_text(rng, megabytes, specials, words=WORDS):
    parts, size = [], 0
    while size < megabytes * 1_000_000:
        r = rng.random()
        if r < 0.70:
            s = rng.choice(words)
        elif r < 0.80:
            s = str(rng.randint(0, 10 ** rng.randint(1, 9)))
        elif r < 0.90:
            s = rng.choice([" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "    \n"])
        elif r < 0.97:
            s = rng.choice(["'s", "'T", "'RE", ",", ".", "!?", "...", "(", ")", "--", "\"", "/*", "*/"])
        else:
            s = rng.choice(specials)
        sep = "" if rng.random() < 0.3 else " "
        parts.append(sep + s)
        size += len(sep) + len(s.encode())
    return "".join(parts)


def build(style, train_text):
    if style == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        specials = ["<|endoftext|>"]
    elif style == "qwen2":
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    else:
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([train_text], trainer)
    tok.add_tokens(["<think>", "</think>"])  # added tokens that are not special (normalized, kept on decode)
    return tok, specials


def main():
    out = sys.argv[1]
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    os.environ["RAYON_NUM_THREADS"] = "1"
    # One text for both: each tokenizer's special tokens, and the other's as plain text.
    text = make_text(random.Random(11), megabytes,
                     ["<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<think>", "</think>", "<think"])
    for style in ("gpt2", "llama3", "qwen2"):
        tok, _ = build(style, make_text(random.Random(7), 0.3, [" "]))
        os.makedirs(f"{out}/{style}", exist_ok=True)
        tok.save(f"{out}/{style}/tokenizer.json")
        start = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        seconds = time.perf_counter() - start
        with open(f"{out}/{style}.ids", "wb") as f:
            f.write(b"".join(i.to_bytes(4, "little") for i in ids))
        with open(f"{out}/{style}.seconds", "w") as f:
            f.write(f"{seconds}\n")
        with open(f"{out}/text.txt", "wb") as f:
            f.write(text.encode())
        if style != "qwen2":  # NFC changes the text
            assert tok.decode(ids, skip_special_tokens=False) == text, "tokenizers' own round trip"


if __name__ == "__main__":
    main()
