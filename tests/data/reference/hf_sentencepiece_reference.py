"""Reference ids from Hugging Face transformers for hwtrain's SentencePiece tokenizer in its Hugging Face form
(Llama 2, Mistral; tests/data/hf_sentencepiece_test.cpp).

Trains a 16,000-piece SentencePiece BPE model with Llama 2's options (byte_fallback, split_digits,
add_dummy_prefix, identity normalization, whitespace kept, <unk> <s> </s> = 0 1 2) with Debian's spm_train (the
sentencepiece package's trainer where spm_train is missing) on half of the fortunes corpus and generated mixed text, and
converts it as transformers does, LlamaTokenizerFast(vocab_file=...).save_pretrained(OUT/<variant>/)
(tokenizer.json, tokenizer.model, tokenizer_config.json), in three variants:
  llama2     legacy=True, add_prefix_space=True: normalizer Prepend "▁" + Replace, decoder ... Strip; the
             form of Llama 2's published tokenizer.json
  metaspace  legacy=False, add_prefix_space=True: Metaspace pre-tokenizer, prepend_scheme "first"
  noprefix   legacy=True, add_prefix_space unset: what transformers 4.57 writes then (Replace only, no
             Prepend, no Strip: no "▁" prefix although the tokenizer.model has add_dummy_prefix)
Documents (OUT/docs.jsonl, {"text": ...} a line): the other half of the fortunes corpus and generated text
(Unicode, rare characters that only byte fallback covers, runs of spaces and newlines, digits, the special
tokens' text <s> </s> <unk>, literal "▁"), cut at blank lines, and a few edge cases; no empty document.
Per variant, AutoTokenizer.from_pretrained (fast) gives: OUT/<variant>.ids, each document's ids without BOS
(add_special_tokens=False; int32 little-endian, documents one after another) and OUT/<variant>.lengths (int32,
ids per document); OUT/<variant>.decoded.json, decode(ids, skip_special_tokens=False) of each document;
OUT/<variant>.stream.txt, the decode of all documents' ids joined by </s> (prepare's layout); and
OUT/<variant>.seconds, the encode time; OUT/<variant>.random.json, [ids, decode] of random id sequences (what a
model samples: byte tokens out of order, special tokens anywhere). It checks that Llama's default encode is <s>
followed by those ids.
Usage: hf_sentencepiece_reference.py OUT_DIR [GENERATED_MEGABYTES]"""
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_tokenizers_reference import WORDS, make_text  # noqa: E402

# Characters the training text does not have (byte fallback), look-alikes of special and byte tokens, "▁".
RARE = ("สวัสดี नमस्ते 안녕하세요 🦀 🧬 👨\u200d👩\u200d👧 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 a\u00a0b \u3000 \u2581 \u2581\u2581x x\u2581 "
        "<0x41> <s <s>> </s <<unk>> \t\t \x0c").split(" ")
EDGE_DOCS = [" ", "  ", "\n", "\n\n\n", "<s>", "</s>", "<unk>", " <s> ", "<s>  Hello", "</s></s>x", "a</s> b",
             "a<s>\nb", "\u2581x \u2581", "  \u2581\u2581", "\u2581", "<0x0A>", "123456789", "🦀", " 🦀 ", "\t\ttab"]
SPM_OPTIONS = dict(model_type="bpe", vocab_size=16000, character_coverage=0.99995, byte_fallback=True,
                   split_digits=True, add_dummy_prefix=True, remove_extra_whitespaces=False,
                   normalization_rule_name="identity", allow_whitespace_only_pieces=True,
                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, max_sentence_length=1 << 20, num_threads=2)
VARIANTS = {"llama2": dict(legacy=True, add_prefix_space=True), "metaspace": dict(legacy=False, add_prefix_space=True),
            "noprefix": dict(legacy=True)}


def fortunes():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith(".dat") or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            docs += [d for d in f.read().split("\n%\n") if d]
    return docs


def train(text_path, prefix):
    if shutil.which("spm_train"):
        args = [f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in SPM_OPTIONS.items()]
        subprocess.run(["spm_train", f"--input={text_path}", f"--model_prefix={prefix}", "--minloglevel=2", *args],
                       check=True, stderr=subprocess.DEVNULL)
        return "spm_train"
    import sentencepiece
    sentencepiece.SentencePieceTrainer.train(input=text_path, model_prefix=prefix, minloglevel=2, **SPM_OPTIONS)
    return "sentencepiece " + sentencepiece.__version__


def main():
    out = sys.argv[1]
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 0.6
    os.environ["RAYON_NUM_THREADS"] = "1"
    start = time.perf_counter()
    corpus = fortunes()
    with open(f"{out}/train.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(corpus[0::2]) + "\n" + make_text(random.Random(7), 0.3, [" "]))
    trainer = train(f"{out}/train.txt", f"{out}/spm")
    generated = make_text(random.Random(11), megabytes, ["<s>", "</s>", "<unk>"], WORDS + RARE * 3)
    docs = [d for d in corpus[1::2] + generated.split("\n\n") + EDGE_DOCS if d]
    with open(f"{out}/docs.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")

    from transformers import AutoTokenizer, LlamaTokenizerFast
    for variant, options in VARIANTS.items():
        LlamaTokenizerFast(vocab_file=f"{out}/spm.model", **options).save_pretrained(f"{out}/{variant}")
        tok = AutoTokenizer.from_pretrained(f"{out}/{variant}")
        assert tok.is_fast, "the fast tokenizer (tokenizer.json)"
        t0 = time.perf_counter()
        ids = tok(docs, add_special_tokens=False)["input_ids"]
        seconds = time.perf_counter() - t0
        with_bos = tok(docs)["input_ids"]
        assert all(b == [tok.bos_token_id] + i for b, i in zip(with_bos, ids)), "Llama's encode: <s>, then the ids"
        with open(f"{out}/{variant}.ids", "wb") as f:
            f.write(b"".join(i.to_bytes(4, "little") for doc in ids for i in doc))
        with open(f"{out}/{variant}.lengths", "wb") as f:
            f.write(b"".join(len(doc).to_bytes(4, "little") for doc in ids))
        with open(f"{out}/{variant}.decoded.json", "w", encoding="utf-8") as f:
            json.dump([tok.decode(doc, skip_special_tokens=False) for doc in ids], f, ensure_ascii=False)
        stream = [i for k, doc in enumerate(ids) for i in ([tok.eos_token_id] if k else []) + doc]
        with open(f"{out}/{variant}.stream.txt", "w", encoding="utf-8") as f:
            f.write(tok.decode(stream, skip_special_tokens=False))
        with open(f"{out}/{variant}.seconds", "w") as f:
            f.write(f"{seconds:.3f}")
        rng, size = random.Random(5), len(tok)  # len() is slow: once
        samples = [[rng.randrange(300 if k % 2 else size) for _ in range(rng.randint(1, 40))]  # 3-258: bytes
                   for k in range(1000)]
        with open(f"{out}/{variant}.random.json", "w", encoding="utf-8") as f:
            json.dump([[s, tok.decode(s, skip_special_tokens=False)] for s in samples], f, ensure_ascii=False)
    with open(f"{out}/about.txt", "w") as f:
        f.write(f"trained by {trainer}; {len(docs)} documents, {sum(len(d.encode()) for d in docs)} bytes; "
                f"reference made in {time.perf_counter() - start:.1f} s\n")


if __name__ == "__main__":
    main()
