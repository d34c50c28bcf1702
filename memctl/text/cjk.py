"""The one table of CJK character ranges (regex class bodies), and the named classes built from it.

Every module that looks for Chinese, Japanese or Korean text builds its class here. The classes differ
on purpose only where a fitted model or a stored index depends on the exact set (changing them would
change shipped scores or need a re-index); each says who reads it.
"""

from __future__ import annotations

# -- the table ------------------------------------------------------------------------------
HIRAGANA = "\u3040-\u309f"
KATAKANA_BLOCK = "\u30a0-\u30ff"
KATAKANA_EXTRA = "\u31f0-\u31ff\uff66-\uff9f"  # phonetic extensions, half-width forms
KATAKANA = KATAKANA_BLOCK + KATAKANA_EXTRA
HAN_BMP = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # ext. A, unified, compatibility
HAN_ASTRAL = "\U00020000-\U0003134f"  # ext. B and later planes
HAN = HAN_BMP + HAN_ASTRAL
HANGUL_SYLLABLES = "\uac00-\ud7af"
HANGUL_JAMO = "\u1100-\u11ff\u3130-\u318f"
HANGUL = HANGUL_SYLLABLES + HANGUL_JAMO
RADICALS = "\u2e80-\u2fff"  # CJK radicals, Kangxi radicals, description characters
BOPOMOFO = "\u3100-\u312f"
YIJING = "\u4dc0-\u4dff"  # hexagram symbols, between Han ext. A and the unified block

# -- the classes ----------------------------------------------------------------------------
# Full: keyword segmentation and the FTS index (memctl.text.segment; mirrored in SQL by store/pg_schema.py).
FULL = HIRAGANA + KATAKANA + HAN + HANGUL
# Kana, BMP Han and Hangul syllables: the features of the fitted gate and relevance models.
MODEL_FEATURES = HIRAGANA + KATAKANA_BLOCK + HAN_BMP + HANGUL_SYLLABLES
# Kana and BMP Han, no Hangul: consolidation's keyword evidence (Korean words fall to neither side there).
KANA_HAN = HIRAGANA + KATAKANA_BLOCK + HAN_BMP
# Grounding's scripts written without spaces: radicals, kana, bopomofo, BMP Han, Hangul syllables.
GROUNDING = RADICALS + HIRAGANA + KATAKANA_BLOCK + BOPOMOFO + HAN_BMP + HANGUL_SYLLABLES
# Han only (with the hexagram symbols in between): importance's character pairs.
HAN_PAIRS = HAN_BMP + YIJING
