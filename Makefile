# 多头注意力练习 · multi-head attention exercise kit.  Every target sets up what it needs.
# Messages of the targets themselves go to stderr, so that stdout is the command's own output
# (make grade FORMAT=json > report.json is valid JSON).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUBMISSION ?= exercises/attention.py
FORMAT ?= text
LANG_ARG ?= zh
# The Makefile's own messages in LANG_ARG's language, one a line: $(call say,中文,English) (no
# comma inside either).
say = $(if $(filter en,$(LANG_ARG)),$(2),$(1))

.PHONY: setup sandbox browser check watch hint submit grade batch gradescope demo release stubs test bench clean

setup: $(VENV)/.installed

# The instructor's venv: the student's requirements, Jupyter, nbgrader and the test tools.
REQUIREMENTS := requirements.txt requirements-notebook.txt requirements-instructor.txt requirements-dev.txt
$(VENV)/.installed: $(REQUIREMENTS)
	@echo "$(call say,正在准备 $(VENV)：安装固定版本的依赖（几分钟）…,setting up $(VENV) with the pinned requirements (a few minutes) ...)" >&2
	@$(PYTHON) -m venv $(VENV) >&2
	@$(VENV)/bin/pip install --quiet --disable-pip-version-check $(addprefix -r ,$(REQUIREMENTS)) >&2
	@touch $@

# bubblewrap gives the grader a real sandbox; without it the grader falls back to a plain
# subprocess with resource limits and says so.  Installed only where we are root with apt.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 \
	  && echo "$(call say,已安装 bubblewrap,installed bubblewrap)" >&2; } || echo "$(call say,没有 bubblewrap：评分用普通子进程运行学生代码,bubblewrap not available: grading uses a plain subprocess)" >&2

# Headless Chromium renders the feedback pages in the tests; best effort, like bubblewrap.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-wqy-microhei) >/dev/null 2>&1 \
	  && echo "$(call say,已安装 chromium,installed chromium)" >&2; } || echo "$(call say,没有 chromium：跳过反馈页面的浏览器测试,chromium not available: the feedback-page browser test is skipped)" >&2

# Students: the public checks on your attention.py (make check SUBMISSION=path, LANG_ARG=en).
check: setup
	@$(PY) -m grader check $(SUBMISSION) --lang $(LANG_ARG)

# Students: rerun the public checks on every save of your file (Ctrl-C to stop).
watch: setup
	@$(PY) -m grader watch $(SUBMISSION) --lang $(LANG_ARG)

# Students: the next hint, one level at a time (make hint EX=attend); plain `make hint` takes
# the first unfinished exercise.  Levels are remembered beside your file, never inside it.
hint: setup
	@$(PY) -m grader hint $(EX) --submission $(SUBMISSION) --lang $(LANG_ARG)

# Students: check your file and package it for handing in: <id>.zip beside it (work + manifest).
# make submit STUDENT=id (asked once, then remembered beside your file); CONFIRM=1 answers "yes"
# for the untouched stub; NOCOMMIT=1 skips the git commit made in a git checkout (never pushed).
# Exit 3 (nothing packaged) and 4 (packaged, not committed) are said by the command itself: they
# end make cleanly; only a crash is make's error.
submit: setup
	@$(PY) -m grader submit $(SUBMISSION) --lang $(LANG_ARG) $(if $(STUDENT),--student '$(STUDENT)') $(if $(CONFIRM),--yes) $(if $(NOCOMMIT),--no-commit); \
	  code=$$?; case $$code in 0|3|4) exit 0;; *) exit $$code;; esac

# Instructors: every check, public and hidden (FORMAT=text|json|markdown|gradescope).
grade: setup sandbox
	@$(PY) -m grader grade $(SUBMISSION) --format $(FORMAT) --lang $(LANG_ARG)

# Instructors: a whole class (make batch DIR=submissions OUT=graded [JOBS=4]
# [VERBOSE=1: how it ran]): per student report.json + feedback.html/.md, gradebook.csv,
# summary.md/.html.  Rerun to resume.  A refusal (exit 2) is said by the command itself.
batch: setup sandbox
	@test -n "$(DIR)" -a -n "$(OUT)" || { echo "$(call say,用法：make batch DIR=提交文件夹 OUT=输出文件夹 [JOBS=n] [VERBOSE=1],usage: make batch DIR=folder OUT=folder [JOBS=n] [VERBOSE=1])" >&2; exit 0; }
	@$(PY) -m grader batch $(DIR) --out $(OUT) --lang $(LANG_ARG) $(if $(JOBS),--jobs $(JOBS)) $(if $(VERBOSE),--verbose); \
	  code=$$?; case $$code in 0|2) exit 0;; *) exit $$code;; esac

# Instructors: the Gradescope autograder zip (setup.sh, run_autograder, grader with hidden checks).
gradescope: setup
	$(PY) -m grader.instructor.gradescope build --out build/gradescope/autograder.zip

# The lesson's demos on your own code (REFERENCE=1 runs the reference solution).
# Exit 3 (a stub), 4 (a result differs from the lesson) and 5 (no such file) are said by the demo
# itself: they end make cleanly; only a crash is make's error.
demo: setup
	@$(PY) -m exercises.demo $(if $(REFERENCE),--reference,--submission $(SUBMISSION)) --lang $(LANG_ARG); \
	  code=$$?; case $$code in 0|3|4|5) exit 0;; *) exit $$code;; esac

stubs: setup
	$(PY) -m grader.authoring stubs

# The exercise as a notebook (course/source/attention/attention.ipynb), generated from
# solutions/attention.py, the rubric and the lesson text in grader/authoring/notebook_build.py.
.PHONY: notebook
notebook: setup
	$(PY) -m grader.authoring notebook

# Instructors (nbgrader, course/): real `nbgrader autograde` over course/submitted/, then the kit's
# sandboxed regrade of every notebook; where they disagree the kit's grade goes into the gradebook
# and course/regrade.md says why.  TIMEOUT=seconds a cell may run (default 120: generous, so a
# correct notebook never times out on a busy machine; an endless loop costs one timeout).
.PHONY: autograde feedback
autograde: setup sandbox
	$(PY) -m grader.instructor.nbgrade autograde $(if $(TIMEOUT),--timeout $(TIMEOUT))

# Instructors: `nbgrader generate_feedback` (course/feedback/), checked for hidden test source.
feedback: setup
	$(PY) -m grader.instructor.nbgrade feedback

release: setup
	$(PY) -m grader.authoring stubs
	$(PY) -m grader.authoring workflow
	$(PY) -m grader.authoring release
	$(PY) -m grader.authoring assignment

# Maintainers: every generated file, in the order each reads the one before it (the stub and the
# notebook from the reference and the rubric, the workflow, the student bundle, the nbgrader
# course).  A test that finds one of them stale names this command.
.PHONY: regen
regen: setup
	$(PY) -m grader.authoring regen

# Four pytest workers on two cores: a file is a work unit, the longest handed out first
# (tests/conftest.py).  The cores are the limit (99.8 % busy): five workers were slower than four.
# A clean clone's whole run: 10.4-12.6 min of tests, 11.6-14.3 with set-up (2026-12-07).
test: setup sandbox browser
	$(PY) -m pytest tests -q -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder

bench: setup sandbox
	$(PY) tests/bench.py

clean:
	rm -rf $(VENV)
