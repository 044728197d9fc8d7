"""Authoring: everything generated from the one reference (solutions/attention.py) and the rubric.

  python -m grader.authoring stubs              solutions/attention.py -> exercises/attention.py
  python -m grader.authoring workflow           the bundle's GitHub Classroom workflow
  python -m grader.authoring release [OUT]      the student bundle (default: release/)
  python -m grader.authoring notebook           course/source/attention/attention.ipynb
  python -m grader.authoring assignment         nbgrader generate_assignment in course/
  python -m grader.authoring regen              all of the above that is committed, in order
                                                (make regen): stub, notebook, workflow,
                                                release, nbgrader course
"""
import os
import sys

from grader.authoring import course, notebook_build, release, stubs, workflow


def assignment():
    seconds = course.generate_assignment(course.COURSE)
    return (f"nbgrader generate_assignment {course.ASSIGNMENT}: {seconds:.1f} s "
            f"-> {os.path.join(course.COURSE, 'release', course.ASSIGNMENT)}")


def main(argv):
    command, rest = (argv[0], argv[1:]) if argv else ("stubs", [])
    steps = {"stubs": stubs.write_stubs, "notebook": notebook_build.write,
             "workflow": workflow.write_workflow,
             "release": lambda: release.build_release(rest[0] if rest else release.RELEASE),
             "assignment": assignment}
    if command == "regen":  # each one reads what the ones before it wrote
        for step in steps:
            main([step])
    elif command in steps:
        print(steps[command]())
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
