"""The bundle's GitHub Classroom workflow: generated from the rubric, triggered on push, and its
commands, run here as Actions would run them, give the reference every public point and the
stub none.  Nothing is installed: the setup step is only dry-run through the bundle's Makefile."""
import base64
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from grader.authoring import stubs as authoring, workflow as workflow_module
from grader.tools import classroom
from grader import rubric

import words

ROOT = authoring.ROOT
RELEASE = os.path.join(ROOT, "release")
SHIPPED = os.path.join(RELEASE, ".github", "workflows", "classroom.yml")
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
# What GitHub runs a `run:` step with on Linux.
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(read(SHIPPED))


def steps_of(workflow):
    (job,) = workflow["jobs"].values()
    return job["steps"]


def graders(workflow):
    return [s for s in steps_of(workflow) if s.get("uses") == COMMAND_GRADER]


def test_workflow_is_generated_from_the_rubric():
    text = workflow_module.classroom_workflow(rubric.load())
    assert read(workflow_module.WORKFLOW) == text, "the workflow is stale: run `make regen`"
    assert read(SHIPPED) == text, "release/ is stale: run `make regen`"


def test_workflow_runs_on_push_on_ubuntu_with_python_311(workflow):
    assert set(workflow["on"]) == {"push", "workflow_dispatch"}
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    uses = [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"]
    assert job["steps"][1]["with"]["python-version"] == "3.11"


def test_one_step_per_public_check_worth_its_rubric_points(workflow):
    public = rubric.load().select(("public",))
    steps = graders(workflow)
    assert [s["with"]["test-name"].split(":")[0] for s in steps] == [c.id for c in public]
    assert [s["with"]["max-score"] for s in steps] == [c.points for c in public]
    assert sum(s["with"]["max-score"] for s in steps) == sum(c.points for c in public)
    (reporter,) = [s for s in steps_of(workflow) if s.get("uses") == REPORTER]
    runners = reporter["with"]["runners"].split(",")
    assert runners == [s["id"] for s in steps]
    for runner in runners:  # the reporter reads env <RUNNER>_RESULTS, the step's output
        assert reporter["env"][runner.upper() + "_RESULTS"] == \
            "${{ steps.%s.outputs.result }}" % runner


def test_advisory_note_in_the_workflow_and_the_student_readme():
    text = read(SHIPPED)
    assert "仅供参考" in text and "advisory" in text and "python -m grader batch" in text
    student = read(os.path.join(RELEASE, "README.md"))
    assert ".github/workflows/classroom.yml" in student
    assert "仅供参考" in student and "advisory" in student and "python -m grader batch" in student


def test_instructor_readme_points_to_the_file_instead_of_copying_it():
    readme = read(os.path.join(ROOT, "docs", "instructors.md"))
    assert "release/.github/workflows/classroom.yml" in readme
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    assert not [b for b in blocks if "grader check" in b or "autograding" in b]


def test_setup_step_is_the_makefile_with_the_cpu_index_for_torch(workflow, tmp_path):
    (setup,) = [s for s in steps_of(workflow) if "make setup" in s.get("run", "")]
    shutil.copy(os.path.join(RELEASE, "Makefile"), tmp_path)
    shutil.copy(os.path.join(RELEASE, "requirements.txt"), tmp_path)

    def dry_run(command):  # MAKEFLAGS=n: make prints the recipe and runs nothing
        env = dict(os.environ, MAKEFLAGS="n")
        result = subprocess.run(BASH + [command], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=30, check=True)
        return [line for line in result.stdout.splitlines() if "grader.tools.install" in line]

    (ci,) = dry_run(setup["run"])
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in ci
    assert " requirements.txt" in ci
    # Students' own machines: no index given (install.py adds PyTorch's CPU wheels only where
    # torch must be installed and the index answers).
    (local,) = dry_run("make setup")
    assert "index-url" not in local and " requirements.txt" in local


def run_workflow(workflow, folder):
    """Every grading step as Actions runs it; the points the reporter would send to Classroom."""
    summary = folder / "summary.md"
    outputs = {}
    for step in steps_of(workflow):
        if "run" in step and "make setup" not in step["run"]:
            env = dict(os.environ, GITHUB_STEP_SUMMARY=str(summary))
            subprocess.run(BASH + [step["run"]], cwd=folder, env=env, check=True, timeout=120)
        elif step.get("uses") == COMMAND_GRADER:
            # The command grader runs `command` in a shell with only PATH and HOME, and gives the
            # step all of max-score on exit 0, else nothing.  Every step's command is the same
            # `python -m grader.classroom REPORT CHECK` but for the check: the first runs in that
            # shell, the others call the same main here (a Python start each is all they'd add).
            command = shlex.split(step["with"]["command"])
            assert command[:4] == [".venv/bin/python", "-m", "grader.classroom",
                                   "out/public-checks.json"] and len(command) == 5, command
            if not outputs:
                env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
                result = subprocess.run(step["with"]["command"], shell=True, cwd=folder,
                                        env=env, capture_output=True, text=True, timeout=60)
                code, said = result.returncode, result.stdout
            else:
                with contextlib.redirect_stdout(io.StringIO()) as printed:
                    code = classroom.main([str(folder / command[3]), command[4]])
                said = printed.getvalue()
            score = step["with"]["max-score"] if code == 0 else 0
            outputs[step["id"]] = base64.b64encode(json.dumps(
                {"max_score": step["with"]["max-score"], "tests": [{"score": score}],
                 "output": said}).encode()).decode()
        elif step.get("uses") == REPORTER:
            results = []
            for runner in step["with"]["runners"].split(","):
                ref = re.fullmatch(r"\$\{\{ steps\.(\w+)\.outputs\.result \}\}",
                                   step["env"][runner.upper() + "_RESULTS"]).group(1)
                results.append(json.loads(base64.b64decode(outputs[ref])))
            points = sum(t["score"] for r in results for t in r["tests"])
            return points, sum(r["max_score"] for r in results), results, summary.read_text()
    raise AssertionError("the workflow has no reporter step")


NOTEBOOK = os.path.join(ROOT, "tests", "submissions", "correct", "notebook.ipynb")


@pytest.mark.parametrize("work, full", [(authoring.SOLUTION, True), (None, False),
                                        (NOTEBOOK, True)],
                         ids=["reference", "stub", "notebook only"])
def test_workflow_commands_give_the_rubric_points(workflow, tmp_path, work, full):
    """The reference gets every public point, the stub none, and a repository whose work is all
    in the notebook (attention.py still the stub) its notebook's points."""
    folder = tmp_path / "repo"
    shutil.copytree(RELEASE, folder, ignore=shutil.ignore_patterns(".venv", "__pycache__", "out"))
    if work:
        shutil.copy(work, folder / os.path.join("attention" + os.path.splitext(work)[1]))
    # Stands in for `make setup`: the bundle's .venv/bin/python is this test's interpreter.
    python = folder / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    points, max_points, results, summary = run_workflow(workflow, folder)
    public = sum(c.points for c in rubric.load().select(("public",)))
    assert max_points == public
    assert points == (public if full else 0)
    assert "**" + (f"{public:g}" if full else "0") + f" / {public:g}**" in summary
    assert "仅供参考" in summary
    graded = "attention.ipynb" if work == NOTEBOOK else "attention.py"
    assert f"评分的文件：`{graded}`" in summary
    if not full:  # a failing step's log says why, as make check does
        outputs = [r["output"] for r in results]
        assert all("✗" in o and ("还没有实现" in o or "没有找到" in o) for o in outputs)


def test_verdict_without_a_report_fails_and_says_where_to_look(tmp_path):
    code, text = classroom.verdict(str(tmp_path / "missing.json"), "attend.scale")
    assert code == 1 and "public checks" in text and "公开检查" in text
    assert all(len(words.foreign_lines(line, lang)) == 0
               for line, lang in zip(text.splitlines(), ("zh", "en")))
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"checks": []}))
    assert classroom.verdict(str(report), "attend.scale")[0] == 1
