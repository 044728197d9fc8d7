"""The command line's shared option groups, and the one place a `Limits` is built from options.

Every subcommand (grader/__main__.py, batch, watch, hint, submit, the notebook's judge, the
instructor tools) declares its language, isolation and limits through these functions, so a flag
means the same, with the same default and help, wherever it appears.
"""
from grader.sandbox.launch import Limits

LANGS = ("zh", "en")
ISOLATIONS = ("auto", "bubblewrap", "process")


def add_lang(parser, help="language of the feedback (zh: 中文, en: English)"):
    parser.add_argument("--lang", choices=LANGS, default="zh", help=help)


def add_isolation(parser, require=True):
    parser.add_argument("--isolation", choices=ISOLATIONS, default="auto",
                        help="how the student's code is run (auto: bubblewrap where it works)")
    if require:
        parser.add_argument("--require-sandbox", action="store_true",
                            help="refuse to grade without bubblewrap")


def add_limits(parser, call_seconds=Limits.call_seconds, memory=True, every=False):
    """--call-timeout (default `call_seconds`), --memory-mb and, with `every`,
    --submission-timeout."""
    parser.add_argument("--call-timeout", type=float, default=call_seconds,
                        help="seconds for one call into the student's code")
    if memory:
        parser.add_argument("--memory-mb", type=int, default=Limits.memory_bytes // 2 ** 20,
                            help="memory of the process that runs the student's code")
    if every:
        parser.add_argument("--submission-timeout", type=float, default=Limits.submission_seconds,
                            help="seconds for all calls of one submission")


# option (its argparse dest) -> (the Limits field it sets, how its value converts)
_LIMIT_OPTIONS = {
    "call_timeout": ("call_seconds", float),
    "memory_mb": ("memory_bytes", lambda mb: int(mb) * 2 ** 20),
    "submission_timeout": ("submission_seconds", float),
}


def limits_from(args=None, **values):
    """The Limits the parsed `args` (or the same options by keyword) ask for; the rest default."""
    fields = {}
    for option, (field, convert) in _LIMIT_OPTIONS.items():
        value = values.get(option, getattr(args, option, None))
        if value:
            fields[field] = convert(value)
    return Limits(**fields)


def isolation_of(args):
    """The isolation asked for: --require-sandbox means bubblewrap or nothing."""
    return "bubblewrap" if getattr(args, "require_sandbox", False) else args.isolation
