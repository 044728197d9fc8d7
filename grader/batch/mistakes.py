"""Root causes: which named mistakes a student really made, once each.

A wrong step shows on several cards: a mask applied after the softmax fails the softmax card, the
reference comparisons of `attend` and of the module, and (today) can also draw a second name on a
card that only sees its effect.  Counting every name on every card would put one student under
three mistakes.  Here the most specific named mistake of a student is the one a reference
comparison diagnosed (a `*.reference` card: the whole output matched a known-wrong variant, the
strongest evidence there is), then the one seen on the most cards, then in the most verdicts; it
explains every other name seen only on the exercises it reaches.  A name on an exercise none of the chosen ones reaches is a second, independent root
cause (a wrong scale in `attend` and a wrong quiz answer are two things to reteach).  A verdict
marked `follows_from` another mistake counts for that mistake.  Outcome keys (wrong_values,
wrong_shape, not_implemented, ...) say that something failed, not which mistake it was: they
never count, except a wrong quiz answer (wrong_answers): each question is a cause of its own.
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
