"""The report's renderers: text, JSON, Markdown and Gradescope's results.json, in zh or en.
Scores and verdicts are the model's (model.Report.from_parts); these only format its plain data."""
from grader import inert, words

STATUS_MARK = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱"}
STATUS_WORDS = words.table("status")


def status_of(r, lang):
    """(mark, words) of a card: the grader's verdict, or a TA's override beside it."""
    said = STATUS_WORDS[lang][r["status"]]
    if not r.get("override"):
        return STATUS_MARK[r["status"]], said
    return "✎", words.text("status", "override", lang, words=said)


def error_of(record, lang):
    """Why a batch entry could not be graded, in `lang` (an older kit's record: the English)."""
    said_ = record.get("error_said")
    if isinstance(said_, dict) and isinstance(said_.get(lang), str):
        return said_[lang]
    return record.get("error") or ""


def check_line(r, title, lang, mark=None, status=None):
    """One check on one line: mark, id, title, [score/max], status words (status "": none)."""
    own_mark, own_status = status_of(r, lang)
    mark, status = own_mark if mark is None else mark, own_status if status is None else status
    line = f"{mark} {r['id']}  {title}  [{points(r['score'])}/{points(r['max_score'])}]"
    return f"{line} {status}" if status else line


TEXT = words.table("report")  # the text report's own words; the checks' are the rubric's


def plural(n, one, many):
    """English counts: 1 check, 2 checks (Chinese needs no plural)."""
    return one if n == 1 else many


def points(x, decimals=4):
    """Every score and point count the kit prints, one way: 1, 0.5, 2.25 (never 1.0 or 1e+01);
    a student's own reports to 4 decimals, the class outputs to 2 (28.6667 -> 28.67)."""
    x = round(float(x), decimals)
    return str(int(x)) if x == int(x) else f"{x:.{decimals}f}".rstrip("0")


def class_points(x):
    """A score of the class outputs (gradebook, class page, a TA's card): two decimals; "" for none."""
    return "" if x is None else points(x, 2)


def feedback(rubric, result, lang):
    """What was checked -> what went wrong (named mistake, expected vs got), part by part where
    the check has several -> where to look."""
    if result["status"] == "passed":
        return notes(rubric, result, lang)
    check = rubric.by_id[result["id"]]
    if {v["key"] for v in result["verdicts"]} & {"not_implemented", "import_failed"}:
        return "\n".join(verdict_lines(rubric, result["verdicts"], lang))
    parts = result.get("parts") or []
    if len(parts) > 1 and len(result["verdicts"]) == sum(p["status"] != "passed" for p in parts):
        lines = part_lines(rubric, result, lang)
    else:
        lines = verdict_lines(rubric, result["verdicts"], lang)
    checked = TEXT[lang]["checked"] + check.checked[lang]
    where = TEXT[lang]["see"] + rubric.section(check.section, lang)
    addresses = ["  " + address for address in rubric.addresses(check.section)]  # [course]
    return "\n".join([checked] + lines + [where] + addresses)


def verdict_lines(rubric, verdicts, lang):
    """Each verdict's message once, with its detail and heatmap."""
    lines, seen = [], set()
    for verdict in verdicts:
        message = rubric.message(verdict["key"], lang, **verdict.get("fields", {}))
        if message in seen:
            continue
        seen.add(message)
        lines.append(message)
        lines += stuck_lines(verdict, lang)
        if verdict.get("detail"):
            lines.append(TEXT[lang]["detail"] + verdict["detail"])
        if verdict.get("heatmap"):
            lines.append(verdict["heatmap"])
    return lines


def line_said(verdict, lang):
    """[what the line is, "| " its code] of a verdict whose `where` names a line of the student's
    file ("attention.py:N: code"): the line a timeout was running or an import stopped at; or []."""
    head, _, code = verdict.get("fields", {}).get("where", "").partition(": ")
    number = head.rpartition(":")[2]
    if not (code and number.isdigit()):
        return []
    said = TEXT[lang]["stuck_line" if verdict.get("key") == "timeout" else "import_line"]
    return [said.format(line=number), f"| {code}"]


def stuck_lines(verdict, lang):
    """Under a call's timeout: the student's line it was running when time ran out."""
    return line_said(verdict, lang) if verdict.get("key") == "timeout" else []


def stuck_at_top(report, lang):
    """Said once, at the top: the first call that timed out and the line it was running."""
    for result in report["checks"]:
        for verdict in result["verdicts"]:
            lines = stuck_lines(verdict, lang)
            if lines:
                head = TEXT[lang]["stuck_top"].format(check=result["id"])
                return [head] + ["    " + line for line in lines] + [""]
    return []


def part_lines(rubric, result, lang):
    """Partial credit explained: "2 of 3 parts right", then each part and, where it failed, its
    verdict (a message said for an earlier part is not repeated)."""
    text = TEXT[lang]
    parts, verdicts = result["parts"], iter(result["verdicts"])
    passed = sum(1 for p in parts if p["status"] == "passed")
    lines, seen, maps = [text["parts"].format(passed=passed, total=len(parts))], set(), []
    for part in parts:
        line = f"{STATUS_MARK[part['status']]} {rubric.part(part['name'], lang)}"
        if part["status"] == "passed":
            lines.append(line)
            continue
        verdict = next(verdicts)
        message = rubric.message(verdict["key"], lang, **verdict.get("fields", {}))
        lines.append(line + text["part_sep"] + (text["same"] if message in seen else message))
        seen.add(message)
        if verdict.get("detail"):
            lines.append(text["detail"] + verdict["detail"])
        if verdict.get("heatmap") and not maps:
            maps.append(verdict["heatmap"])
    return lines + maps


def notes(rubric, result, lang):
    """What a passing check could not judge here (it cost nothing), each message once."""
    return "\n".join(dict.fromkeys(rubric.message(note.get("key", ""), lang, **note.get("fields", {}))
                                   for note in result.get("notes") or []))


def import_failure(report):
    """The verdict of a file that could not be imported (every check carries it), or None."""
    return next((v for r in report["checks"] for v in r["verdicts"] if at_import(v)), None)


def at_import(verdict):
    """Whether a verdict is about the file's import: an error raised at import, or a worker that
    timed out or died while importing."""
    return verdict.get("key") == "import_failed" or \
        verdict.get("fields", {}).get("during") == "import"


def import_failure_lines(rubric, verdict, lang):
    """Said once, at the top: what stopped the import and the line itself, indentation kept
    (an IndentationError is about its spaces)."""
    return [rubric.message(verdict["key"], lang, **verdict.get("fields", {}))] + \
        ["    " + line for line in line_said(verdict, lang)] + [""]


def misconception(result):
    """The key of a check's first failing verdict (its named mistake), or None."""
    return result["verdicts"][0]["key"] if result["verdicts"] else None


def card(rubric, result, lang):
    """One check as `make check` shows it: mark, id, title, points, status, then the feedback."""
    lines = [check_line(result, rubric.by_id[result["id"]].title[lang], lang)]
    lines += ["    " + line for line in feedback(rubric, result, lang).splitlines()]
    return "\n".join(lines)


def to_json(rubric, report, lang):
    out = {"score": report["score"], "max_score": report["max_score"], "checks": []}
    for r in report["checks"]:
        out["checks"].append({
            "id": r["id"], "title": rubric.by_id[r["id"]].title[lang], "status": r["status"],
            "score": r["score"], "max_score": r["max_score"], "visibility": r["visibility"],
            "exercise": r["exercise"], "misconception": misconception(r),
            "feedback": feedback(rubric, r, lang), "parts": r["parts"],
            **({"override": r["override"]} if r.get("override") else {}),
        })
    out.update({k: v for k, v in report.items() if k not in ("score", "max_score", "checks")})
    return inert.json_text(out, ensure_ascii=False, indent=2)


# What an untouched stub answers: its exercise is said in one line, not a card per check.
NOT_STARTED = {"not_implemented": "not_started", "quiz_missing": "not_answered"}


def not_started(checks):
    """"not_started" or "not_answered" where an exercise's checks all failed on the untouched
    stub, else None."""
    keys = {misconception(r) for r in checks}
    return NOT_STARTED.get(keys.pop()) if len(keys) == 1 and \
        all(r["score"] == 0 for r in checks) else None


def to_text(rubric, report, lang, hidden_not_run=0):
    """The report as `make check` prints it, inert for a terminal."""
    text = TEXT[lang]
    failure = import_failure(report)
    lines = import_failure_lines(rubric, failure, lang) if failure else stuck_at_top(report, lang)
    by_exercise = {}
    for r in report["checks"]:
        by_exercise.setdefault(r["exercise"], []).append(r)
    untouched = {} if failure else {ex: not_started(rs) for ex, rs in by_exercise.items()}
    for exercise, run in by_exercise.items():
        if untouched.get(exercise):
            lines.append(text["exercise_line"].format(
                exercise=exercise, what=text[untouched[exercise]],
                max_score=points(sum(c["max_score"] for c in run))))
            continue
        lines.append(f"\n== {exercise} ==")
        for r in run:
            if failure:  # said once, above; the cards only list what did not run
                lines.append(check_line(r, rubric.by_id[r["id"]].title[lang], lang,
                                        status=text["not_run"]))
            else:
                lines.append(card(rubric, r, lang))
    lines += _totals(rubric, report, lang, hidden_not_run)
    # The next step, where every exercise before the first untouched one passes.
    first = next((ex for ex, state in untouched.items() if state), None)
    before = list(by_exercise)[:list(by_exercise).index(first)] if first else []
    if first is not None and all(r["status"] == "passed" for ex in before
                                 for r in by_exercise[ex]):
        check = rubric.by_id[by_exercise[first][0]["id"]]
        lines.append(text["start_here"].format(exercise=first,
                                               section=rubric.section(check.section, lang)))
    meta = report["metadata"]
    lines.append(f"[{meta_line(meta, lang)}]")
    if meta.get("left_out"):
        lines.append("\n" + text["left_out"])
        lines.extend("  " + line for line in meta["left_out"][:20])
    output = meta.get("student_output")
    if output:
        lines.append(f"\n--- {text['output']} ---")
        lines.extend("| " + line for line in output.splitlines()[:40])
        lines.append(f"--- {text['output_end']} ---")
    # The student's output, messages and values are in it: no control character reaches a terminal.
    return inert.for_terminal("\n".join(lines).lstrip("\n") + "\n")


def meta_line(meta, lang):
    """How the report was made (the sandbox, the seed, the versions), for a TA's questions."""
    return TEXT[lang]["meta"].format(**{key: meta.get(key) for key in
                                        ("isolation", "seed", "torch", "rubric_hash")})


def still_hidden(rubric, lang):
    """What the hidden checks will still look at, by exercise: a public run that passes says it,
    so a student with wrong quiz answers is not told that everything is done."""
    text, counts = TEXT[lang], {}
    for check in rubric.select(("hidden",)):
        counts[check.exercise] = counts.get(check.exercise, 0) + 1
    return text["and"].join(
        text["hidden_quiz" if exercise == "quiz" else "hidden_exercise"].format(exercise=exercise, n=n)
        for exercise, n in counts.items())


def _totals(rubric, report, lang, hidden_not_run):
    text = TEXT[lang]
    passed = sum(1 for r in report["checks"] if r["status"] == "passed")
    total = len(report["checks"])
    lines = ["\n" + text["score"].format(score=points(report["score"]),
                                        max_score=points(report["max_score"]), passed=passed,
                                        total=total, checks=plural(total, "check", "checks"))]
    if hidden_not_run:
        lines.append(text["hidden"].format(n=hidden_not_run,
                                           checks=plural(hidden_not_run, "check", "checks"),
                                           were=plural(hidden_not_run, "was", "were"),
                                           what=still_hidden(rubric, lang)))
    return lines


def to_markdown(rubric, report, lang):
    text = TEXT[lang]
    lines = [f"# {text['title']}", "",
             f"**{points(report['score'])} / {points(report['max_score'])}**", "",
             f"| | {text['table_check']} | {text['table_points']} | {text['table_status']} |",
             "|---|---|---|---|"]
    for r in report["checks"]:
        check = rubric.by_id[r["id"]]
        mark, status = status_of(r, lang)
        lines.append(f"| {mark} | `{r['id']}` {check.title[lang]} | "
                     f"{points(r['score'])}/{points(r['max_score'])} | {status} |")
    for r in report["checks"]:
        said = feedback(rubric, r, lang)
        if said:
            lines += ["", f"### `{r['id']}`", "", inert.markdown_fence(said)]
    meta = report["metadata"]
    if meta.get("left_out"):
        lines += ["", text["left_out"], "",
                  inert.markdown_fence("\n".join(meta["left_out"][:20]))]
    lines += ["", f"<sub>{meta_line(meta, lang)}</sub>", ""]
    return "\n".join(lines)


GRADESCOPE = words.table("gradescope")


def _passes(r):
    return r["score"] >= r["max_score"]


def gradescope_summary(rubric, report, lang):
    """What a student reads first on Gradescope: the score, the first public check to look at
    (where in the lesson) and where the hidden checks stand, without naming them."""
    said = GRADESCOPE[lang]
    lines = [said["score"].format(score=points(report["score"]),
                                  max_score=points(report["max_score"]))]
    public = [r for r in report["checks"] if r["visibility"] == "public"]
    hidden = [r for r in report["checks"] if r["visibility"] != "public"]
    first = next((r for r in public if not _passes(r)), None)
    if first is not None:
        check = rubric.by_id[first["id"]]
        lines.append(said["first"].format(title=check.title[lang],
                                          where=rubric.section(check.section, lang)))
    elif hidden and not all(_passes(r) for r in hidden):
        lines.append(said["public_ok"])
    else:
        lines.append(said["all_ok"])
    if hidden:
        lines.append(said["hidden"].format(n=len(hidden), passed=sum(map(_passes, hidden))))
    return words.text("gradescope", "join", lang).join(lines)


def _gradescope_output(rubric, r, lang):
    """A test's Markdown: an override first (the TA's reason), then the feedback, fenced."""
    output = feedback(rubric, r, lang) if not _passes(r) else ""
    fenced = inert.markdown_fence(output) if output else ""
    if r["status"] in ("error", "timeout") and not _passes(r):
        fenced = f"**{r['status']}**\n\n{fenced}"
    o = r.get("override")
    if o:
        status = STATUS_WORDS["zh"][o["status"]] if lang == "zh" else o["status"]
        line = GRADESCOPE[lang]["override"].format(
            was=points(o["was"]), max_score=points(r["max_score"]), status=status,
            score=points(r["score"]), why=inert.markdown_inline(o["why"]))
        fenced = line + ("\n\n" + fenced if fenced else "")
    return fenced


def gradescope_test(check, number, scored, passed, output, lang):
    """One check as a Gradescope test, `scored` its (score, max_score)."""
    return {"name": f"{check.id}: {check.title[lang]}", "number": str(number), "score": scored[0],
            "max_score": scored[1], "status": "passed" if passed else "failed",
            "output": output, "output_format": "md", "tags": [check.id, check.exercise],
            "visibility": "visible" if check.visibility == "public" else "after_published"}


def to_gradescope(rubric, report, lang):
    """Gradescope's results.json: one test per check, a top-level summary for the student, the
    kit's provenance and the checks' pytest-json-report document in extra_data."""
    tests = [gradescope_test(rubric.by_id[r["id"]], number, (r["score"], r["max_score"]),
                             _passes(r), _gradescope_output(rubric, r, lang), lang)
             for number, r in enumerate(report["checks"], 1)]
    meta = report["metadata"]
    provenance = {k: meta.get(k) for k in ("isolation", "rubric_hash", "rubric_version", "seed",
                                           "torch", "python")}
    provenance["overridden"] = [r["id"] for r in report["checks"] if r.get("override")]
    if "pytest" in report:
        provenance["pytest"] = report["pytest"]
    return inert.json_text({
        "score": report["score"], "output_format": "md", "visibility": "visible", "tests": tests,
        "output": gradescope_summary(rubric, report, lang), "extra_data": provenance,
    }, ensure_ascii=False, indent=2)


RENDERERS = {"json": to_json, "markdown": to_markdown, "gradescope": to_gradescope}
