# vecenvs developer tasks. Everything is installed into a local virtual
# environment in .venv; nothing touches the system Python.
#
#   make dashboard  run the dashboard on http://localhost:8501 (live comparisons, profiles)
#   make bench      a quick benchmark of the backends in the terminal
#   make lint       the gate: ruff (lint, import order, format check) and mypy over the package
#   make test       run the test suite (extra pytest args: make test PYTEST_ARGS="-k pool")
#   make lab        open the notebook course in JupyterLab
#   make grade      grade a class's exercises: make grade SUBMISSIONS=path/to/submissions
#   make release    build the student release (no solutions): make release OUT=path/to/folder
#   make clean      remove .venv and caches

# The Python used to create the venv (must be 3.10+); override with `make PYTHON3=python3.12`.
PYTHON3 ?= python3
VENV    := .venv
PYTHON  := $(VENV)/bin/python
# Touched after a successful install; reinstall only when pyproject.toml is newer.
STAMP   := $(VENV)/.installed
# Extra arguments for pytest, e.g. PYTEST_ARGS="tests/test_project_files.py -x".
PYTEST_ARGS ?=

.PHONY: dashboard lint test bench lab grade release install clean

# The dashboard, on this machine only (it starts processes and a profiler); Ctrl-C stops it
# and the benchmark it is running. PORT=8502 make dashboard to use another port.
PORT ?= 8501
dashboard: $(STAMP)
	$(PYTHON) -m streamlit run dashboard/app.py --server.address=localhost --server.port=$(PORT) \
		--browser.gatherUsageStats=false

# Run the benchmark CLI in quick mode.
bench: $(STAMP)
	$(PYTHON) -m vecenvs bench --quick

# The gate CI runs before the tests: ruff's lint rules and import order, ruff's formatting (check
# only: `ruff format .` applies it) and mypy over the package (settings in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Run the test suite. pytest's exit code 5 means "no tests collected": treat it as a failure
# with a clear message, because it means the suite (or the PYTEST_ARGS selection) is empty.
test: $(STAMP)
	@status=0; $(PYTHON) -m pytest $(PYTEST_ARGS) || status=$$?; \
	if [ $$status -eq 5 ]; then \
		echo "ERROR: pytest collected no tests (exit code 5). Did the test suite vanish?" >&2; \
	fi; \
	exit $$status

# The course: JupyterLab with this project's Python as the kernel, opened at notebook 1 with
# the repository as its root, so that exercises/ is a click away (given a folder, Jupyter
# would make that folder the root and hide everything above it). Jupyter refuses to run as
# root without --allow-root, and py-spy (notebook 5) needs root to attach.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(ALLOW_ROOT) notebooks/01-timing-one-env.ipynb

# >>> instructor-only: `python -m exercises.release` leaves these targets out of the student release.
# Grade every student's folder under SUBMISSIONS (one subfolder per student), hidden checks
# included: the table, the gradebook CSV, and per student SUBMISSIONS/_feedback/<student>/
# feedback.txt and results.json (Gradescope). Points and policy: exercises/policy.toml.
# GRADE_ARGS passes more options, e.g. GRADE_ARGS="--manual manual-scores.csv".
SUBMISSIONS ?= submissions
GRADE_ARGS ?=
grade: $(STAMP)
	$(PYTHON) -m exercises.grade $(SUBMISSIONS) --csv $(SUBMISSIONS)/scores.csv $(GRADE_ARGS)

# Build the student release (no solutions, no hidden checks, no grader) into OUT, a folder to
# push as the GitHub Classroom template repository: see exercises/INSTRUCTORS.md.
OUT ?= student-release
release: $(STAMP)
	$(PYTHON) -m exercises.release $(OUT)
# <<< instructor-only

# Create .venv (if needed) and install the package; a no-op when already up to date.
install: $(STAMP)

# Create the virtual environment and bring its pip up to date
# (the pip bundled with an old Python may be too old for editable pyproject installs).
$(PYTHON):
	$(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install --upgrade pip

# Install the package in editable mode with the test, mujoco and peer extras, then write the
# stamp. constraints.txt pins torch (pulled in by Stable-Baselines3) to its CPU build.
$(STAMP): pyproject.toml constraints.txt | $(PYTHON)
	$(PYTHON) -m pip install -e '.[test,dashboard,notebooks,mujoco,sb3,envpool,ray]' -c constraints.txt
	touch $@

# Remove the virtual environment, build artifacts and caches.
clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
