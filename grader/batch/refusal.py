"""What a TA's command says on stderr, each line in the TA's language (words.toml's [batch]): a
refusal carries its key and fields and is said only where the language is known."""
import sys

from grader import words


class Refusal(ValueError):
    """A command that cannot go on: [batch] `key` with its fields; a field may itself be said in
    both languages ({"zh": ..., "en": ...}).  str() is the English."""

    def __init__(self, key, **fields):
        self.key, self.fields = key, fields
        super().__init__(self.said("en"))

    def said(self, lang):
        fields = {name: value[lang] if isinstance(value, dict) else value
                  for name, value in self.fields.items()}
        return words.text("batch", self.key, lang, **fields)


def say(key, lang, **fields):
    """One line of [batch] on stderr."""
    print(words.text("batch", key, lang, **fields), file=sys.stderr)


def refuse(exc, lang):
    """The refusal said as an error line; the exit status 2."""
    message = exc.said(lang) if isinstance(exc, Refusal) else f"`{exc}`"  # the sandbox's own
    say("error", lang, message=message)
    return 2
