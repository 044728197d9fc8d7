"""The vocabulary (words.toml): the UI words of every tool and renderer, zh and en (the checks' own
words are the rubric's).  A section per tool or renderer; each entry `key = { zh = "...", en = "..." }`.
"""
import functools
import os
import tomllib

WORDS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "words.toml")
LANGS = ("zh", "en")


@functools.lru_cache(maxsize=None)
def load(path=WORDS_PATH):
    """{section: {key: {"zh": ..., "en": ...}}}, read once."""
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def pair(section, key):
    """The entry's two words: {"zh": ..., "en": ...}."""
    entry = load()[section][key]
    return {lang: entry[lang] for lang in LANGS}


def text(section, key, lang, **fields):
    """The entry's words in `lang`, with {placeholders} filled (none given: the template as is)."""
    template = load()[section][key][lang]
    return template.format(**fields) if fields else template


def table(section):
    """One section by language, {"zh": {key: ...}, "en": {key: ...}}: the shape a tool indexes as
    TEXT[lang][key]."""
    entries = load()[section]
    return {lang: {key: entry[lang] for key, entry in entries.items()} for lang in LANGS}
