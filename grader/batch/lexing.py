"""copydetect's filtered code, from pygments' Python tokens exactly as pygments makes them, faster.

copydetect's filter_code (utils.py) lexes a file with pygments' PythonLexer, a RegexLexer: at each
position it tries the current state's rules one by one until one matches (the root state has 56;
on the class's code, 36 regex calls a token).  That was ~4.5 ms of a ~7 ms fingerprint.

Here the same rules are tried by fewer calls.  For each state and each ASCII character a token can
begin with, the rules that can match there are joined into one regex, their alternatives in the
rules' order (past ASCII, all of the state's rules, in one regex: a text of many different
characters makes no more of them).  Python's regex engine tries alternatives left to right at one
position, so the first alternative that matches is the rule pygments would have taken, with the
same end (nothing follows an alternative).  pygments' own action of that rule is then applied: a
token type takes the matched text; a callback (bygroups, ...) gets that rule's own match object,
from its own regex.  A rule is left out for a character only where its parsed pattern cannot begin
with that character (`_first`, which keeps the rule whenever it meets a construct it does not
know).  At the end of the text, and in a state whose rules cannot be joined (a backreference, a
flag of their own), the rules are tried one by one, as pygments does.  A lexer that is not the
RegexLexer this expects is lexed by pygments' own get_tokens.

Measured on the bench's class of 200 (one process): 4.5 -> 1.1 ms a file; the joined regexes,
compiled as characters are met, cost ~0.25 s once per process.  tests/test_lexing.py holds the
tokens and the filtered code equal to pygments' and copydetect's on the kit's corpus, every file
of the kit, hostile text and random edits of them.
"""
import functools
import re

PYTHON = "python"
# The flags a rule may carry besides the lexer's own: a leading global flag becomes a scoped one.
_LEADING_FLAGS = re.compile(r"\(\?([imsx]+)\)")
_plans = {}


@functools.cache
def python_lexer():
    """copydetect's lexer (get_lexer_by_name("python")), made once: it holds no state between
    texts."""
    from pygments import lexers

    return lexers.get_lexer_by_name(PYTHON)


def tokens(code, lexer=None):
    """[(token type, text)] of `code`: pygments' `lexer.get_tokens(code)`, item for item."""
    return list(token_stream(code, lexer))


def token_stream(code, lexer=None):
    """tokens(code), one at a time (as pygments yields them: a large file is never held twice)."""
    lexer = lexer or python_lexer()
    plan = _plan_of(lexer)
    if plan is None or lexer.filters:
        yield from lexer.get_tokens(code)
        return
    text = lexer._preprocess_lexer_input(code)
    for _, kind, value in plan.unprocessed(text, lexer):
        yield kind, value


def filter_code(code):
    """copydetect.utils.filter_code(code, any .py name, "python"): the filtered code (names as
    V/F/O, strings as S, comments and spacing dropped) and its offsets, the same values."""
    import numpy as np

    out, length, offset, offsets = [], 0, 0, [[0, 0]]
    kinds = _KINDS
    for kind, value in token_stream(code):
        what = kinds.get(kind) or _kind_of(kind)
        if what == "keep":
            out.append(value)
            length += len(value)
        elif what == "drop":  # spacing and comments: nothing written, the offset grows
            offsets.append([length - 1, offset])
            offset += len(value)
        elif what == "S" and value in ("'", '"'):
            out.append('"')
            length += 1
        else:  # one letter for the token: V, F, O, P or S
            out.append(what)
            length += 1
            # copydetect records a class name's own length, not the running offset
            offsets.append([length - 1, len(value) - 1 if what == "O" else offset])
            offset += len(value) - 1
    return "".join(out), np.array(offsets)


_KINDS = {}


def _kind_of(kind):
    """What filter_code does with a token type, in copydetect's order of tests."""
    from pygments import token

    if kind in {token.Name, token.Name.Variable, token.Name.Attribute}:
        what = "V"
    elif kind in token.Name.Function:
        what = "F"
    elif kind in token.Name.Class:
        what = "O"
    elif kind == token.Comment.Preproc or kind == token.Comment.Hashbang:
        what = "P"
    elif kind in token.Text or kind in token.Comment:
        what = "drop"
    elif kind in token.Literal.String:
        what = "S"
    else:
        what = "keep"
    _KINDS[kind] = what
    return what


def _plan_of(lexer):
    key = type(lexer)
    if key not in _plans:
        _plans[key] = _Plan.of(lexer)
    return _plans[key]


class _Plan:
    """A RegexLexer's states, each with its rules joined per first character."""

    @classmethod
    def of(cls, lexer):
        from pygments.lexer import RegexLexer

        # Only RegexLexer's own driver is known to be what this mirrors.
        if not isinstance(lexer, RegexLexer) or \
                type(lexer).get_tokens_unprocessed is not RegexLexer.get_tokens_unprocessed:
            return None
        try:
            return cls(lexer)
        except (AttributeError, TypeError, ValueError):  # internals not as expected
            return None

    def __init__(self, lexer):
        from pygments.token import Error, Whitespace, _TokenType

        self.token_type, self.error, self.whitespace = _TokenType, Error, Whitespace
        self.rules = lexer._tokens
        self.flags = lexer.flags
        self.joinable = {state: all(_joinable(rule[0].__self__, self.flags) for rule in rules)
                         for state, rules in self.rules.items()}
        self.starts = {}  # per state, once it is met (a file meets few of the lexer's 49 states)
        self.by_char = {state: {} for state in self.rules}
        self.joined = {state: {} for state in self.rules}

    def starts_of(self, state):
        """_first_char of each of `state`'s rules, in order (parsed once, when first needed)."""
        if state not in self.starts:
            self.starts[state] = [_first_char(rule[0].__self__) for rule in self.rules[state]]
        return self.starts[state]

    def select(self, state, text, pos):
        """(match, action, new state) of the first of `state`'s rules matching at pos, or None."""
        rules = self.rules[state]
        if pos < len(text) and self.joinable[state]:
            by_char = self.by_char[state]
            char = text[pos]
            if char > "\x7f":  # past ASCII: all of the state's rules, one regex for every such char
                char = None
            entry = by_char.get(char)
            if entry is None:
                try:
                    entry = by_char[char] = self._join(state, char)
                except (re.error, OverflowError, RecursionError):  # one by one, as pygments
                    self.joinable[state] = False
                    return self.select(state, text, pos)
            match, rule_of = entry
            m = match(text, pos) if match is not None else None
            if m is None:
                return None
            # the alternative that matched closed its group last; the rule is the one whose
            # group took part, whichever way it is found
            index = rule_of.get(m.lastindex)
            if index is None:
                index = next(i for group, i in rule_of.items() if m.start(group) >= 0)
            rule = rules[index]
            if type(rule[1]) is not self.token_type:
                m = rule[0](text, pos)  # a callback reads the rule's own groups
            return m, rule[1], rule[2]
        for rexmatch, action, new_state in rules:
            m = rexmatch(text, pos)
            if m:
                return m, action, new_state
        return None

    def _join(self, state, char):
        """(match, {group index: rule index}) of the rules of `state` that can begin with char
        (every rule for None)."""
        starts = self.starts_of(state)
        chosen = tuple(i for i, start in enumerate(starts)
                       if start is None or char is None or start(char))
        if chosen not in self.joined[state]:
            rules = self.rules[state]
            parts = [f"(?P<_rule{i}>{_scoped(rules[i][0].__self__.pattern)})" for i in chosen]
            if parts:
                joined = re.compile("|".join(parts), self.flags)
                rule_of = {joined.groupindex[f"_rule{i}"]: i for i in chosen}
                self.joined[state][chosen] = (joined.match, rule_of)
            else:
                self.joined[state][chosen] = (None, {})
        return self.joined[state][chosen]

    def unprocessed(self, text, lexer):
        """lexer.get_tokens_unprocessed(text) (RegexLexer's), its rule found by select()."""
        token_type = self.token_type
        pos = 0
        statestack = ["root"]
        while 1:
            found = self.select(statestack[-1], text, pos)
            if found is not None:
                m, action, new_state = found
                if action is not None:
                    if type(action) is token_type:
                        yield pos, action, m.group()
                    else:
                        yield from action(lexer, m)
                pos = m.end()
                if new_state is not None:
                    _move(statestack, new_state)
                continue
            # no rule matched: pygments' own way on
            try:
                if text[pos] == "\n":
                    statestack = ["root"]
                    yield pos, self.whitespace, "\n"
                    pos += 1
                    continue
                yield pos, self.error, text[pos]
                pos += 1
            except IndexError:
                break


def _move(statestack, new_state):
    """RegexLexer's state transition, in place."""
    if isinstance(new_state, tuple):
        for state in new_state:
            if state == "#pop":
                if len(statestack) > 1:
                    statestack.pop()
            elif state == "#push":
                statestack.append(statestack[-1])
            else:
                statestack.append(state)
    elif isinstance(new_state, int):
        if abs(new_state) >= len(statestack):
            del statestack[1:]
        else:
            del statestack[new_state:]
    elif new_state == "#push":
        statestack.append(statestack[-1])
    else:
        raise ValueError(f"wrong state def: {new_state!r}")


def _scoped(pattern):
    """A rule's pattern as one alternative among others: a leading global flag made scoped."""
    m = _LEADING_FLAGS.match(pattern)
    return f"(?{m.group(1)}:{pattern[m.end():]})" if m else pattern


def _parsed(pattern):
    import re._parser as parser  # Python 3.11's name (sre_parse before)

    return parser.parse(pattern.pattern, pattern.flags)


# What may change a pattern's meaning once it is one alternative among others: a backreference
# by number (\1: the numbers move) or by name, a conditional on a group, a global flag anywhere
# but at the start.  Read on the text, so that whatever looks like one counts (an escaped
# backslash before a digit too): a rule wrongly kept out of a joined regex costs time, not tokens.
_NOT_JOINABLE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(|\(\?[aiLmsux]+\)")


def _joinable(pattern, flags):
    """A rule that means the same as an alternative of a joined regex: the lexer's flags and at
    most a leading global (?i) more (made scoped: _scoped), no group name of its own (names must
    not clash), nothing _NOT_JOINABLE finds past its leading flags."""
    text = pattern.pattern
    leading = _LEADING_FLAGS.match(text)
    extra = pattern.flags & ~(flags | re.UNICODE)
    if extra and not (leading and extra == re.IGNORECASE):
        return False
    past_flags = leading.end() if leading else 0
    return not pattern.groupindex and not _NOT_JOINABLE.search(text, past_flags)


def _first_char(pattern):
    """A test of one character: False only where `pattern` cannot match text beginning with it;
    None where any character may (the pattern may match nothing, or is not understood)."""
    try:
        first, empty = _first(list(_parsed(pattern)))
    except Exception:  # a pattern the parser reads otherwise: keep the rule everywhere
        return None
    if first is None or empty or not first:
        return None
    return re.compile("|".join(first), pattern.flags & (re.IGNORECASE | re.ASCII)).match


def _first(items):
    """(regexes of one character that can begin a match of `items`, or None for any; whether
    `items` can match the empty string).  Conservative: a zero-width assertion is passed over
    (leaving it out only admits more), an unknown construct means any character."""
    import re._constants as c

    alternatives = []
    for op, av in items:
        if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            continue
        if op is c.LITERAL:
            return alternatives + [re.escape(chr(av))], False
        if op is c.NOT_LITERAL:
            return alternatives + ["[^" + re.escape(chr(av)) + "]"], False
        if op is c.IN:
            one = _char_class(av)
            return (None, False) if one is None else (alternatives + [one], False)
        if op is c.BRANCH:
            empty = False
            for branch in av[1]:
                first, branch_empty = _first(list(branch))
                if first is None:
                    return None, False
                alternatives += first
                empty = empty or branch_empty
        elif op is c.SUBPATTERN:
            _, add_flags, del_flags, inner = av
            if del_flags or add_flags & ~re.IGNORECASE:
                return None, False
            first, empty = _first(list(inner))
            if first is None:
                return None, False
            alternatives += [f"(?i:{one})" for one in first] if add_flags else first
        elif op is c.ATOMIC_GROUP:
            first, empty = _first(list(av))
            if first is None:
                return None, False
            alternatives += first
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            least, _, inner = av
            first, inner_empty = _first(list(inner))
            if first is None:
                return None, False
            alternatives += first
            empty = least == 0 or inner_empty
        else:  # ANY, a backreference, a conditional, ...: any character
            return None, False
        if not empty:
            return alternatives, False
    return alternatives, True


def _char_class(items):
    """A parsed character set as a regex of one character, or None where it is not understood."""
    import re._constants as c

    categories = {c.CATEGORY_DIGIT: r"\d", c.CATEGORY_NOT_DIGIT: r"\D",
                  c.CATEGORY_SPACE: r"\s", c.CATEGORY_NOT_SPACE: r"\S",
                  c.CATEGORY_WORD: r"\w", c.CATEGORY_NOT_WORD: r"\W"}
    out = []
    for op, av in items:
        if op is c.NEGATE:
            out.insert(0, "^")
        elif op is c.LITERAL:
            out.append(re.escape(chr(av)))
        elif op is c.RANGE:
            out.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op is c.CATEGORY and av in categories:
            out.append(categories[av])
        else:
            return None
    return "[" + "".join(out) + "]"
