# SPDX-License-Identifier: BSD-3-Clause
"""remora.text: the tokenizers of Remora's text/ library (docs/tokenizers.md).

WordTokenizer is Transformer-XL's word-level tokenizer (build it from a
corpus); WordPieceTokenizer is BERT's (from a vocab.txt or a Hugging Face
directory). Both encode text to ids and decode ids to text.
"""
from . import _C

Tokenizer = _C.text.Tokenizer
WordTokenizer = _C.text.WordTokenizer
WordTokenizerOptions = _C.text.WordTokenizerOptions
WordPieceTokenizer = _C.text.WordPieceTokenizer
Encoding = _C.text.Encoding
tokenizer_from_json = _C.text.tokenizer_from_json
