"""The student stub, generated from the one reference.

The stub keeps every signature, docstring and `# TODO` line of the reference; the code between
`### BEGIN SOLUTION` and `### END SOLUTION` becomes `raise NotImplementedError(...)` (or
`NAME = None` for module-level answers).
"""
import os
import re

from grader import paths

ROOT = paths.KIT_ROOT
SOLUTION = paths.SOLUTION
EXERCISE = os.path.join(paths.KIT_ROOT, "exercises", "attention.py")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
DEF_LINE = re.compile(r"^\s*(?:def|class)\s+(\w+)")
ASSIGNMENT = re.compile(r"^(\w+)\s*=")


def make_stub(source):
    """The reference with each solution block replaced by a stub."""
    out, block, name, owner = [], None, "code", ""
    for line in source.splitlines():
        stripped = line.strip()
        match = DEF_LINE.match(line)
        if match and block is None:
            if stripped.startswith("class"):
                owner = name = match.group(1)
            else:  # a method is named with its class: CausalSelfAttention.forward
                name = f"{owner}.{match.group(1)}" if line.startswith(" ") else match.group(1)
        if stripped == BEGIN:
            block = {"indent": line[:len(line) - len(line.lstrip())], "lines": []}
            continue
        if stripped == END:
            out.extend(_stub_block(block, name))
            block = None
            continue
        if block is not None:
            block["lines"].append(line)
        else:
            out.append(line)
    if block is not None:
        raise ValueError("unterminated ### BEGIN SOLUTION block")
    return "\n".join(out) + "\n"


def _stub_block(block, name):
    indent, lines = block["indent"], block["lines"]
    todos = [indent + line.strip() for line in lines if line.strip().startswith("# TODO")]
    if indent == "":  # module level: answers become None, so the file still imports
        return todos + [line for m in map(ASSIGNMENT.match, lines) if m
                        for line in _answer_stub(m.group(1))]
    message = f"{name} 尚未实现 / not implemented yet"
    return todos + [f'{indent}raise NotImplementedError("{message}")']


def _answer_stub(name):
    """`NAME = None  # TODO`, after its form in each language (the rubric's [quiz_forms])."""
    from grader import rubric

    form = rubric.load().quiz_forms.get(name)
    said = [f"# {name}：{form['zh']}", f"# {name}: {form['en']}"] if form else []
    return said + [f"{name} = None  # TODO"]


def write_stubs():
    with open(SOLUTION, encoding="utf-8") as handle:
        stub = make_stub(handle.read())
    os.makedirs(os.path.dirname(EXERCISE), exist_ok=True)
    with open(EXERCISE, "w", encoding="utf-8") as handle:
        handle.write(stub)
    return EXERCISE
