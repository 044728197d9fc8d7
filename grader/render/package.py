"""A `make submit` package as a report and the gradebook show it: what the judge found on reading
the package (grader/judge/manifest.py inspect) turned into lines."""


def package_notes(package):
    """Short English lines for the gradebook's note and the report: only what needs a look."""
    if not package:
        return []
    if not package.get("manifest"):
        notes = [f"package: {package.get('error')}; graded as a plain zip"]
        return notes
    notes = []
    identity = package.get("identity")
    if identity:
        notes.append(f"package: its manifest names student {identity['manifest']!r}, not "
                     f"{identity['entry']!r}; graded as {identity['entry']!r} (the entry's name)")
    if package["changed"]:
        notes.append(f"package: {', '.join(package['changed'])} changed after packaging "
                     f"(sha256 differs from the manifest); graded as it is")
    if package["missing"]:
        notes.append(f"package: {', '.join(package['missing'])} listed in the manifest but missing")
    if package["extra"]:
        shown = ", ".join(package["extra"][:5]) + (" …" if len(package["extra"]) > 5 else "")
        notes.append(f"package: {len(package['extra'])} file(s) not in the manifest, left out: "
                     f"{shown}")
    if not package["current_rubric"]:
        now = package["graded_with"]
        notes.append(f"package made with kit {package['kit_version']} (rubric "
                     f"{package['rubric_hash']}); graded with today's kit {now['kit_version']} "
                     f"(rubric {now['rubric_hash']})")
    return notes


def describe(package, lang):
    """The lines a text or Markdown report shows about the package (always one at least)."""
    if not package:
        return []
    zh = lang == "zh"
    if package.get("manifest"):
        head = (f"{'提交包 package' if zh else 'package'}: {package['student']} · "
                f"{package['created']} · kit {package['kit_version']}")
        state = ("文件与清单一致 files match the manifest" if zh else "files match the manifest") \
            if not (package["changed"] or package["missing"]) else \
            ("⚠ 文件与清单不一致 files differ from the manifest" if zh
             else "⚠ files differ from the manifest")
        lines = [f"{head} · {state}"]
    else:
        lines = []
    lines += ["⚠ " + note for note in package_notes(package)]
    return lines
