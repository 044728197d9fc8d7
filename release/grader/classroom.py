"""The name the Classroom workflows in students' repositories run (`python -m grader.classroom`)."""
import sys

from grader.tools.classroom import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
