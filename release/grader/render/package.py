"""A `make submit` package as a report and the gradebook show it: what the judge found on reading
the package (grader/judge/manifest.py inspect) turned into lines."""


def package_notes(package, lang="en"):
    """Short lines (in `lang`) for the gradebook's note and the report: only what needs a look."""
    if not package:
        return []
    zh = lang == "zh"
    if not package.get("manifest"):
        return [f"提交包：{package.get('error')}；按普通 zip 评分" if zh else
                f"package: {package.get('error')}; graded as a plain zip"]
    notes = []
    identity = package.get("identity")
    if identity:
        notes.append(f"提交包的清单写的学生是 {identity['manifest']!r}，不是 {identity['entry']!r}；"
                     f"按文件名 {identity['entry']!r} 评分" if zh else
                     f"package: its manifest names student {identity['manifest']!r}, not "
                     f"{identity['entry']!r}; graded as {identity['entry']!r} (the entry's name)")
    if package["changed"]:
        notes.append(f"提交包：{', '.join(package['changed'])} 在打包后被改过（sha256 与清单不符）；"
                     "按现状评分" if zh else
                     f"package: {', '.join(package['changed'])} changed after packaging "
                     f"(sha256 differs from the manifest); graded as it is")
    if package["missing"]:
        notes.append(f"提交包：清单列出的 {', '.join(package['missing'])} 不在包里" if zh else
                     f"package: {', '.join(package['missing'])} listed in the manifest but missing")
    if package["extra"]:
        shown = ", ".join(package["extra"][:5]) + (" …" if len(package["extra"]) > 5 else "")
        notes.append(f"提交包：{len(package['extra'])} 个文件不在清单中，未读取：{shown}" if zh else
                     f"package: {len(package['extra'])} file(s) not in the manifest, left out: "
                     f"{shown}")
    if not package["current_rubric"]:
        now = package["graded_with"]
        notes.append(f"提交包由 {package['kit_version']} 版练习包制作（评分表 "
                     f"{package['rubric_hash']}）；按今天的 {now['kit_version']} 版评分（评分表 "
                     f"{now['rubric_hash']}）" if zh else
                     f"package made with kit {package['kit_version']} (rubric "
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
    lines += ["⚠ " + note for note in package_notes(package, lang)]
    return lines
