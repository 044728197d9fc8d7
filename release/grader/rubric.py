"""Load the rubric (rubric.toml): the one table of check ids, points, visibility and messages."""
import dataclasses
import functools
import hashlib
import os
import tomllib
from urllib.parse import quote

RUBRIC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rubric.toml")
LANGS = ("zh", "en")


@dataclasses.dataclass(frozen=True)
class Check:
    id: str
    exercise: str
    points: float
    visibility: str
    section: str
    title: dict
    checked: dict
    hints: str = ""  # the hint ladder a failure of this check leads to (default: its exercise's)


class Rubric:
    def __init__(self, path=RUBRIC_PATH):
        with open(path, "rb") as handle:
            raw = handle.read()
        self.hash = hashlib.sha256(raw).hexdigest()[:16]
        data = tomllib.loads(raw.decode("utf-8"))
        self.version = data["version"]
        self.sections = data["sections"]
        self.titles = data["titles"]
        # Where the lessons are read ([course], set once by the instructor): each book's page
        # and the anchors that are not the titles themselves.
        self.course = data.get("course", {})
        unknown = set(self.course.get("anchors", {})) - {n for t in self.titles.values() for n in t}
        if unknown:
            raise ValueError(f"[course.anchors] names no title of [titles]: {sorted(unknown)}")
        self.messages = data["messages"]
        # Verdicts that say *that* something went wrong, not *which* mistake it was.
        self.outcome_keys = {k for k, m in self.messages.items() if m.get("kind") == "outcome"}
        # Outcomes that still name what to reteach: the wrong answer to one quiz question.
        self.answer_keys = {k for k, m in self.messages.items() if m.get("answer")}
        self.hints = data.get("hints", {})
        self.quiz_forms = data.get("quiz_forms", {})  # answer name -> {zh, en}
        self.parts = data.get("parts", {})
        self.checks = [
            Check(id=c["id"], exercise=c["exercise"], points=float(c["points"]),
                  visibility=c["visibility"], section=c["section"],
                  title={lang: c["title_" + lang] for lang in LANGS},
                  checked={lang: c["checked_" + lang] for lang in LANGS},
                  hints=c.get("hints", c["exercise"]))
            for c in data["check"]
        ]
        self.by_id = {c.id: c for c in self.checks}
        if len(self.by_id) != len(self.checks):
            raise ValueError("duplicate check id in the rubric")

    def select(self, visibilities):
        return [c for c in self.checks if c.visibility in visibilities]

    def message(self, key, lang, **fields):
        """The zh/en text for `key`, with {placeholders} filled; unknown fields stay visible."""
        template = self.messages.get(key, {}).get(lang) or self.messages.get(key, {}).get("en") or key
        return template.format_map(_Fields({k: in_lang(v, lang) for k, v in fields.items()}))

    def part(self, name, lang):
        """What one part of a check tried (its input), by its test name (itself where unnamed)."""
        return (self.parts.get(name) or {}).get(lang) or name

    def section(self, key, lang):
        """Where in the lessons to look, by the lessons' own section titles: in Chinese as the
        lessons print them; in English by an English title with the Chinese one beside it."""
        where = self.sections.get(key, {})
        parts = [self._titles(where.get(book, []), book, lang) for book in ("lesson", "chapter")]
        if lang == "zh":
            lesson, chapter = (f"第 12 讲{parts[0]}" if parts[0] else "",
                               f"「多头自注意力」一章的{parts[1]}" if parts[1] else "")
            return "；".join(p for p in (lesson, chapter) if p)
        chapter_title = self._titles(["多头自注意力"], "chapter", "en")
        lesson, chapter = (f"lesson 12: {parts[0]}" if parts[0] else "",
                           f"chapter {chapter_title}: {parts[1]}" if parts[1] else "")
        return "; ".join(p for p in (lesson, chapter) if p)

    def addresses(self, key):
        """The address of each title `key` names, in section()'s order: its book's page ([course])
        and the title's anchor there ([course.anchors], else the title); none where no page is set."""
        where, anchors = self.sections.get(key, {}), self.course.get("anchors", {})
        return [f"{self.course[book]}#{quote(anchors.get(name, name), safe='')}"
                for book in ("lesson", "chapter") if self.course.get(book)
                for name in where.get(book, [])]

    def _titles(self, names, book, lang):
        if lang == "zh":
            return "".join(f"「{name}」" for name in names)
        english = [f"\"{self.titles[book][name]}\" (「{name}」)" for name in names]
        return " and ".join(english) if len(english) < 3 else \
            ", ".join(english[:-1]) + " and " + english[-1]

    def exercises(self):
        return list(dict.fromkeys(c.exercise for c in self.checks))


def said(zh, en):
    """A field value said in both languages (a check's own words that fill a message): the
    message picks the reader's language, so no sentence mixes the two."""
    return {"zh": zh, "en": en}


def in_lang(value, lang):
    """A field value in `lang`: one said in both languages gives its own; any other is data."""
    if isinstance(value, dict) and set(value) == set(LANGS):
        return value[lang]
    return value


class _Fields(dict):
    def __missing__(self, key):
        return "{" + key + "}"


@functools.lru_cache(maxsize=None)
def load():
    return Rubric()
