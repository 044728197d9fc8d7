"""Root causes: which named mistakes a student really made, once each.

A wrong step shows on several cards (a mask applied after the softmax fails the softmax card and
both reference comparisons, and may draw a second name on a card that only sees its effect).  The
most specific named mistake is the one a `*.reference` card diagnosed (the whole output matched a
known-wrong variant), then the one seen on the most cards, then in the most verdicts; it explains
every other name seen only on the exercises it reaches.  A name on an exercise none of the chosen
ones reaches is a second, independent root cause.  A verdict marked `follows_from` another mistake
counts for that mistake.  Outcome keys (wrong_values, not_implemented, ...) never count, except a
wrong quiz answer: each question is a cause of its own (wrong_answers).
"""


def _evidence(report, is_named):
    """{key: {"cards": {check id}, "exercises": {exercise}, "verdicts": n, "reference": bool}}."""
    seen = {}
    for result in report["checks"]:
        for verdict in result.get("verdicts") or []:
            key = verdict.get("follows_from") or verdict.get("key")
            if not key or not is_named(key):
                continue
            item = seen.setdefault(key, {"cards": set(), "exercises": set(), "verdicts": 0,
                                         "reference": False})
            item["cards"].add(result["id"])
            item["reference"] |= result["id"].endswith(".reference")
            item["exercises"].add(result["exercise"])
            item["verdicts"] += 1
    return seen


def root_causes(report, is_named):
    """{key: sorted check ids where it was seen}, most specific first."""
    seen = _evidence(report, is_named)
    order = sorted(seen, key=lambda k: (not seen[k]["reference"], -len(seen[k]["cards"]),
                                        -seen[k]["verdicts"], k))
    reached, roots = set(), {}
    for key in order:
        if seen[key]["exercises"] <= reached:
            continue  # explained by a more specific mistake on the same exercises
        roots[key] = sorted(seen[key]["cards"])
        reached |= seen[key]["exercises"]
    return roots


def wrong_answers(report, is_answer):
    """{key: [check id]} for each quiz question answered wrong: every question is its own cause
    (one card each), so none explains another."""
    found = {}
    for result in report["checks"]:
        for verdict in result.get("verdicts") or []:
            if is_answer(verdict.get("key")):
                found.setdefault(verdict["key"], [])
                if result["id"] not in found[verdict["key"]]:
                    found[verdict["key"]].append(result["id"])
    return found


def causes(report, is_named, is_answer):
    """Everything to reteach this student: the root causes, then the quiz questions answered
    wrong."""
    return {**root_causes(report, is_named), **wrong_answers(report, is_answer)}
