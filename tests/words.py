"""One language per line: what a student reads in Chinese holds no English prose, and what they
read in English holds no Chinese, outside code spans (`...`), quoted lesson titles (「...」) and
the words of code (identifiers, commands, units, math letters).  Shared by the tests of every
door's words (tests/test_student_words.py, the corpus's reports in tests/test_precision.py)."""
import re

# Words a Chinese sentence may carry: code, commands, file names, library terms, units.
CODE_WORDS = set("""
make check hint EX watch submit grade demo STUDENT SUBMISSION CONFIRM NOCOMMIT LANG_ARG REFERENCE
Ctrl C attention py ipynb md html json csv zip id git push commit GitHub Classroom venv pip
raise assert NotImplementedError ValueError RuntimeError AssertionError TypeError IndexError
ZeroDivisionError IndentationError SyntaxError ModuleNotFoundError MemoryError KeyboardInterrupt
None True False yes y N KiB MiB GiB torch nn Linear Module ModuleList Parameter Tensor
tensor register_buffer buffer state_dict mask masked_fill softmax reshape transpose view
contiguous tril triu bool int float tuple list float32 float64 dim max sum exp log ln sqrt
NaN nan inf epoch epochs split_heads merge_heads attend CausalSelfAttention forward qkv
out_proj q_proj k_proj v_proj return_weights max_len heads d_model n_heads arange equal no_grad
detach data stack einsum scores weights context quiz Q K V Wo bias False exit os _exit
bubblewrap isolation rubric seed Jupyter kernel nbgrader Gradescope Python python IPython
lang zh en notebook stub TODO README docs PNG png matplotlib pyplot copy LM
eval exec getattr importlib __import__ Transformer MultiheadAttention
CPU GPU CUDA cpu cuda meta device dtype bfloat16 item FloatTensor
""".split())
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
CODE_SPAN = re.compile(r"`[^`\n]*`")
TITLE = re.compile(r"「[^」]*」")
PLACEHOLDER = re.compile(r"\{\w+(![rsa])?(:[^}]*)?\}")
TAG = re.compile(r"</?[a-z]+[^>]*>")  # Markdown's <sub>, HTML's own tags
# An English word in a Chinese line that is code-like: a dotted or called name, snake_case,
# CamelCase with an inner capital, or any word holding a digit.
CODE_LIKE = re.compile(r"^(\w*[_\d]\w*|[A-Z][a-z]+[A-Z]\w*)$")


def strip_quoted(text):
    """The text without its code spans, quoted titles and template placeholders."""
    for pattern in (CODE_SPAN, TITLE, PLACEHOLDER, TAG):
        text = pattern.sub(" ", text)
    return text


def english_words(text):
    """English words outside code in a Chinese text."""
    text = strip_quoted(text)
    for _ in range(3):  # calls and indexing, nested: triu(diagonal=0), merged[b, t]
        text = re.sub(r"[\w.]*\([^()]*\)|\w+\[[^\[\]]*\]", " ", text)
    text = re.sub(r"[A-Za-z0-9_.+-]*\d[A-Za-z0-9_.+-]*", " ", text)  # versions, 2.13.0+cpu
    text = re.sub(r"[\w.]*\.\w+", " ", text)  # dotted names: torch.ones, .to
    text = re.sub(r"[\w.-]*/[\w./-]*", " ", text)  # paths: grader/, .github/workflows
    words = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text)
    return {w for w in words if len(w) > 1 and w not in CODE_WORDS and not CODE_LIKE.match(w)}


def chinese_characters(text):
    """Chinese characters (and full-width punctuation) outside code and quoted titles."""
    return set(CJK.findall(strip_quoted(text)))


def foreign(text, lang):
    """The other language's words in `text`, read as `lang` (empty: one language)."""
    return english_words(text) if lang == "zh" else chinese_characters(text)


def foreign_lines(text, lang):
    """Each line of `text` that holds the other language's words, with those words (a Markdown
    fence's own line, ```text, is code; a line quoted with `| ` is the student's code or output)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(("```", "|"))]
    return [(line, foreign(line, lang)) for line in lines if foreign(line, lang)]
