"""A `make submit` package as a report and the gradebook show it: what the judge found on reading
the package (grader/judge/manifest.py inspect) turned into lines."""
from grader import words


def package_notes(package, lang="en"):
    """Short lines (in `lang`) for the gradebook's note and the report: only what needs a look."""
    if not package:
        return []
    say = (lambda key, **fields: words.text("package", key, lang, **fields))
    if not package.get("manifest"):
        return [say("no_manifest", error=package.get("error"))]
    notes = []
    identity = package.get("identity")
    if identity:
        notes.append(say("identity", manifest=identity["manifest"], entry=identity["entry"]))
    if package["changed"]:
        notes.append(say("changed", files=", ".join(package["changed"])))
    if package["missing"]:
        notes.append(say("missing", files=", ".join(package["missing"])))
    if package["extra"]:
        shown = ", ".join(package["extra"][:5]) + (" …" if len(package["extra"]) > 5 else "")
        notes.append(say("extra", n=len(package["extra"]), shown=shown))
    if not package["current_rubric"]:
        now = package["graded_with"]
        notes.append(say("old_kit", kit=package["kit_version"], rubric=package["rubric_hash"],
                         now_kit=now["kit_version"], now_rubric=now["rubric_hash"]))
    return notes


def describe(package, lang):
    """The lines a text or Markdown report shows about the package (always one at least)."""
    if not package:
        return []
    if package.get("manifest"):
        head = words.text("package", "head", lang, student=package["student"],
                          created=package["created"], kit=package["kit_version"])
        state = words.text("package", "differ" if package["changed"] or package["missing"]
                           else "match", lang)
        lines = [f"{head} · {state}"]
    else:
        lines = []
    lines += ["⚠ " + note for note in package_notes(package, lang)]
    return lines
