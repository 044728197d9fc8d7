"""The released notebook as a student hands it in (the tests' and the bench's notebooks)."""
import copy


def _lines(text):
    """A notebook cell's source as Jupyter writes it: lines keeping their newline."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def handed_in(release, pieces, extra=None, after=None):
    """The released notebook with the cells named in `pieces` ({grade id: source}, e.g. from
    notebook_build.split_source of a .py) filled in, and maybe one `extra` cell after `after`."""
    nb = copy.deepcopy(release)
    cells = []
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in pieces:
            cell["source"] = _lines(pieces[grade_id])
        cells.append(cell)
        if extra and grade_id == after:
            cells.append({"cell_type": "code", "execution_count": None, "id": "student-cell",
                          "metadata": {}, "outputs": [], "source": _lines(extra)})
    nb["cells"] = cells
    return nb
