"""Authoring: everything generated from the one reference (solutions/attention.py) and the rubric.

  python -m grader.authoring stubs              solutions/attention.py -> exercises/attention.py
  python -m grader.authoring workflow           the bundle's GitHub Classroom workflow
  python -m grader.authoring release [OUT]      the student bundle (default: release/)
  python -m grader.authoring notebook           course/source/attention/attention.ipynb
  python -m grader.authoring assignment         nbgrader generate_assignment in course/
  python -m grader.authoring student-notebook OUT   the student notebook, from a throw-away course
  python -m grader.authoring regen              all of the above that is committed, in order
                                                (make regen): stub, notebook, workflow,
                                                release, nbgrader course
"""
import os
import sys

from grader.authoring import course, notebook_build, release, stubs, workflow


def main(argv):
    command, rest = (argv[0], argv[1:]) if argv else ("stubs", [])
    if command == "stubs":
        print(stubs.write_stubs())
        return 0
    if command == "workflow":
        print(workflow.write_workflow())
        return 0
    if command == "release":
        print(release.build_release(rest[0] if rest else release.RELEASE))
        return 0
    if command == "notebook":
        return notebook_build.main(rest)
    if command == "assignment":
        seconds = course.generate_assignment(course.COURSE)
        print(f"nbgrader generate_assignment {course.ASSIGNMENT}: {seconds:.1f} s "
              f"-> {os.path.join(course.COURSE, 'release', course.ASSIGNMENT)}")
        return 0
    if command == "regen":  # each one reads what the ones before it wrote
        for step in ("stubs", "notebook", "workflow", "release", "assignment"):
            code = main([step])
            if code:
                return code
        return 0
    if command == "student-notebook" and rest:
        print(course.release_notebook(rest[0]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
