# SPDX-License-Identifier: BSD-3-Clause
"""Writes the WordPiece tokenizer goldens (tests/test_text.cpp): two small BERT
vocabularies (uncased and cased) trained with HF `tokenizers` on a multilingual
sample, and HF `BertTokenizer`'s tokens, ids, pair encodings and decodings of a
second, varied multilingual sample.

    python3 -m venv /tmp/hf && /tmp/hf/bin/pip install transformers
    /tmp/hf/bin/python tools/goldens/make_wordpiece_goldens.py     # from the repository root

transformers is never a dependency of the build or the tests: only its outputs,
tests/data/wordpiece/, are committed. The goldens record the versions used.
"""
import json
import os

import tokenizers
import transformers
from tokenizers import BertWordPieceTokenizer
from transformers import BertTokenizer

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "tests", "data", "wordpiece")

# The vocabularies are learned from this text (repeated so that frequent pieces win).
TRAIN = """
The quick brown fox jumps over the lazy dog. It doesn't matter; we're here, you've seen it!
Transformers encode recurrence: a recurrence encoding matrix mixes the heads.
Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Mädchen.
Le renard brun rapide saute par-dessus le chien paresseux. Élève, café, naïve, garçon.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la niña? ¡Olé!
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!
Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο. ΟΔΟΣ, οδός.
快速的棕色狐狸跳过了懒狗。我们在这里学习语言模型。
素早い茶色の狐がのろまな犬を飛び越える。こんにちは、世界！
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요 세계!
الثعلب البني السريع يقفز فوق الكلب الكسول.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।
İstanbul'da 2024'te 3.14159 ve 1,000,000 sayıları; e-mail: user@example.com, https://example.org/a?b=c
"""

# Encoded with the learned vocabularies: unseen words, unseen characters ([UNK]),
# accents, case, CJK, control and zero-width characters, odd spaces, special tokens.
SAMPLES = [
    "Hello, world! The quick brown fox.",
    "Paris is the [MASK] of France.",
    "We're here; it doesn't MATTER, you've seen it!",
    "Größe und Straße — über den Fuchs „springt“ «saute».",
    "Élève naïve au café: ÇA VA? garçon!",
    "¿Dónde está el zorro? ¡Olé!",
    "Привет, ленивая собака! ПРИВЕТ.",
    "ΟΔΟΣ οδός Σίσυφος ΣΊΣΥΦΟΣ.",
    "我们学习语言模型。快速的狐狸！",
    "こんにちは、世界！素早い狐。",
    "안녕하세요 세계! 빠른 여우.",
    "الكلب السريع",
    "तेज़ लोमड़ी कूदती है।",
    "İstanbul İIıi 2024'te 3.14 + 1,000,000 = ?",
    "user@example.com https://example.org/a?b=c&d=e",
    "tab\tnew\nline\r\nnbsp\u00a0thin\u2009ideo\u3000end",
    "zero\u200bwidth soft\u00adhyphen ctrl\u0007bell del\u007f nul\u0000 repl\ufffd",
    "emoji 😀 and symbols ∑ ∞ € ™ ©",
    "combining e\u0301 vs \u00e9, A\u030a vs \u00c5",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "x" * 120,
    "   ",
    "",
    "[CLS] already special [SEP] tokens [PAD] [UNK] inside",
    "mixed[MASK]glued and [mask] lower",
]
PAIRS = [
    ("The fox jumps.", "Der Fuchs springt über den Hund."),
    ("Где собака?", "快速的狐狸"),
]


def train_vocab(lowercase):
    tok = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=None, clean_text=True,
                                 handle_chinese_chars=True)
    tok.train_from_iterator([TRAIN] * 20, vocab_size=700, min_frequency=2,
                            limit_alphabet=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    # Leave a few characters out so that [UNK] occurs (words containing them).
    vocab = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
             if t.lstrip("#") not in ("ж", "ß", "狗", "z")]
    return vocab


def main():
    cases = {}
    for name, lower in (("uncased", True), ("cased", False)):
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in train_vocab(lower)))
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": lower, "tokenize_chinese_chars": True, "strip_accents": None,
                       "model_max_length": 64, "tokenizer_class": "BertTokenizer"}, f, indent=2)
            f.write("\n")
        hf = BertTokenizer.from_pretrained(d)
        out = []
        for text in SAMPLES:
            enc = hf(text)
            out.append({
                "text": text,
                "tokens": hf.tokenize(text),
                "ids": enc["input_ids"],
                "decoded": hf.decode(enc["input_ids"]),
                "decoded_skip": hf.decode(enc["input_ids"], skip_special_tokens=True),
            })
        pairs = []
        for a, b in PAIRS:
            enc = hf(a, b)
            pairs.append({"a": a, "b": b, "ids": enc["input_ids"], "type_ids": enc["token_type_ids"]})
            enc = hf(a, b, max_length=12, truncation="longest_first", padding="max_length")
            pairs[-1].update({"ids_12": enc["input_ids"], "type_ids_12": enc["token_type_ids"],
                              "mask_12": enc["attention_mask"]})
        cases[name] = {"samples": out, "pairs": pairs}
    golden = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
              "tokenizer": "BertTokenizer", **cases}
    with open(os.path.join(OUT, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
