# vecenvs tasks. Everything is installed into a local virtual
# environment in .venv; nothing touches the system Python.
#
#   make dashboard  run the dashboard on http://localhost:8501 (live comparisons, profiles)
#   make bench      a quick benchmark of the backends in the terminal
#   make lab        open the notebook course in JupyterLab
#   make grade      grade a class's exercises: make grade SUBMISSIONS=path/to/submissions JOBS=2
#   make release    build the student release (no solutions): make release OUT=path/to/folder
#   make gradescope build Gradescope's autograder zip: make gradescope ZIP=autograder.zip
#   make collect    the students' repositories at the deadline: make collect ROSTER=roster.csv
#   make peers      add the peers measured beside ours: Stable-Baselines3 (with torch), Ray, EnvPool
#   make docs       build the documentation site into docs/_build/html (notebooks run in quick mode)
#   make lint       the gate: ruff (lint, import order, format check) and mypy over the package
#   make test       run the test suite (extra pytest args: make test PYTEST_ARGS="-k pool")
#   make clean      remove .venv and caches
#
# Each target installs only what it needs (the extras of pyproject.toml named below), the first
# time it runs; the peers are a step of their own because torch, Ray and EnvPool are most of the
# size.

# The Python used to create the venv (must be 3.10+); override with `make PYTHON3=python3.12`.
PYTHON3 ?= python3
VENV    := .venv
PYTHON  := $(VENV)/bin/python
# What each target installs: extras of pyproject.toml, into the one .venv. Each set has a stamp,
# $(VENV)/.installed-<set>, touched after it installed; a set is installed again only when
# pyproject.toml or constraints.txt is newer than its stamp.
EXTRAS_bench     := mujoco
EXTRAS_dashboard := dashboard,mujoco
EXTRAS_lab       := notebooks
EXTRAS_peers     := peers
EXTRAS_docs      := docs,notebooks
EXTRAS_test      := test,dashboard,notebooks,mujoco,peers,docs
# torch (for Stable-Baselines3) comes from wherever pip finds torch==2.13.0 (constraints.txt).
# PyPI's Linux x86_64 wheel is the CUDA build (several GB with its nvidia-* packages); set
# TORCH_INDEX to an index of CPU builds to take torch from there first, e.g.
# make peers TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
comma := ,
.PHONY: dashboard lint test bench lab grade release gradescope collect peers install clean docs

# The dashboard, on this machine only (it starts processes and a profiler); Ctrl-C stops it
# and the benchmark it is running. PORT=8502 make dashboard to use another port.
PORT ?= 8501
dashboard: $(VENV)/.installed-dashboard
	$(PYTHON) -m streamlit run dashboard/app.py --server.address=localhost --server.port=$(PORT) \
		--browser.gatherUsageStats=false

# Run the benchmark CLI in quick mode.
bench: $(VENV)/.installed-bench
	$(PYTHON) -m vecenvs bench --quick

# >>> developer-only: `python -m exercises.release` leaves these out of the student release,
# which has its own `make test` (the lab's check, tests/test_lab.py) instead.
# Extra arguments for pytest, e.g. PYTEST_ARGS="tests/test_project_files.py -x".
PYTEST_ARGS ?=
# How many pytest-xdist processes run the suite, a test file each at a time: auto = the CPUs
# this process may use, at most 4 (tests/conftest.py); 0 runs it in this one process.
PYTEST_WORKERS ?= auto

# The gate CI runs before the tests: ruff's lint rules and import order, ruff's formatting (check
# only: `ruff format .` applies it) and mypy over the package (settings in pyproject.toml).
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Run the test suite (it installs everything the suite tests, peers included). pytest's exit
# code 5 means "no tests collected": treat it as a failure
# with a clear message, because it means the suite (or the PYTEST_ARGS selection) is empty.
# Its files run side by side (PYTEST_WORKERS): much of the suite waits on processes it
# started (kernels, Ray, a browser, the grader's sandboxes), so even 2 CPUs run two files.
test: $(VENV)/.installed-test
	@status=0; $(PYTHON) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS) \
		|| status=$$?; \
	if [ $$status -eq 5 ]; then \
		echo "ERROR: pytest collected no tests (exit code 5). Did the test suite vanish?" >&2; \
	fi; \
	exit $$status

# The documentation site (docs/README.md): the API reference from the docstrings, the CLI
# reference from its parser, the guides, the notebooks executed in quick mode (cached in
# docs/_build/.jupyter_cache: a second build runs only the notebooks that changed), the
# exercises and the results pages (docs/gen_results.py, from docs/results/data/). Warnings are
# errors (-W), every cross-reference must resolve (-n); tests/test_docs.py checks the links.
# DOCS_EXECUTE=0 renders the notebooks without running them.
DOCS_EXECUTE ?= 1
docs: $(VENV)/.installed-docs
	VECENVS_DOCS_EXECUTE=$(DOCS_EXECUTE) $(PYTHON) -m sphinx -b html -n -W --keep-going docs docs/_build/html
	@echo "The site: docs/_build/html/index.html"
# <<< developer-only

# The course: JupyterLab with this project's Python as the kernel, opened at notebook 1 with
# the repository as its root, so that exercises/ is a click away (given a folder, Jupyter
# would make that folder the root and hide everything above it). Jupyter refuses to run as
# root without --allow-root; as anyone else it needs none (notebook 5 says whether py-spy may
# attach there, and shows recorded profiles where it may not).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(VENV)/.installed-lab
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(ALLOW_ROOT) notebooks/01-timing-one-env.ipynb

# >>> instructor-only: `python -m exercises.release` leaves these targets out of the student release.
# Grade every student's folder under SUBMISSIONS (one subfolder per student), hidden checks
# included: the table, the gradebook CSV, and per student SUBMISSIONS/_feedback/<student>/
# feedback.txt and results.json (Gradescope). Points and policy: exercises/policy.toml.
# JOBS students are graded at once, each in its own sandbox (as many as the CPUs is a good start).
# GRADE_ARGS passes more options: GRADE_ARGS="--manual hand.csv" merges the hand scores into the
# last run's results without running the checks; GRADE_ARGS="--student ID" grades one again.
SUBMISSIONS ?= submissions
GRADE_ARGS ?=
JOBS ?= 1
grade: $(VENV)/.installed-lab
	$(PYTHON) -m exercises.grade $(SUBMISSIONS) --csv $(SUBMISSIONS)/scores.csv --jobs $(JOBS) $(GRADE_ARGS)

# Build the student release (no solutions, no hidden checks, no grader) into OUT, a folder to
# push as the GitHub Classroom template repository: see exercises/INSTRUCTORS.md.
OUT ?= student-release
release: $(VENV)/.installed-lab
	$(PYTHON) -m exercises.release $(OUT)

# Collect a class by the deadline into SUBMISSIONS (new or empty): each student's repository,
# named in ROSTER (a CSV of student,repository: a URL on any git host, or a path; GitHub
# Classroom's grades export also works), cloned or fetched into CLONES, at its last commit that
# counts under the policy's due date; it names the later commits it left out. Without ROSTER,
# CLONES is a folder of clones already made. SUBMISSIONS/submitted.csv holds the times for the
# late penalty: then make grade GRADE_ARGS="--submitted $(SUBMISSIONS)/submitted.csv".
CLONES ?= student-repos
ROSTER ?=
collect: $(VENV)/.installed-lab
	$(PYTHON) -m exercises.collect $(CLONES) $(SUBMISSIONS) $(if $(ROSTER),--roster $(ROSTER))

# Build Gradescope's autograder zip (setup.sh, run_autograder, the grader and the checks, no
# solutions) into ZIP, to upload as a programming assignment's autograder.
ZIP ?= gradescope-autograder.zip
gradescope: $(VENV)/.installed-lab
	$(PYTHON) -m exercises.gradescope build $(ZIP)
# <<< instructor-only

# The peers, measured beside our backends once installed (the dashboard and the notebooks say
# which are missing and point here).
peers: $(VENV)/.installed-peers
	@echo "Installed the peers: Stable-Baselines3 (with torch), Ray and EnvPool."

# Create .venv (if needed) and install what the dashboard and the course need; a no-op when
# already up to date.
install: $(VENV)/.installed-dashboard $(VENV)/.installed-lab

# Create the virtual environment and bring its pip up to date
# (the pip bundled with an old Python may be too old for editable pyproject installs).
$(PYTHON):
	$(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install --upgrade pip

# Install the package in editable mode with one set's extras, then write that set's stamp.
# constraints.txt pins torch (Stable-Baselines3's) and the lint tools; with TORCH_INDEX set, a
# set that brings torch takes it from that index first.
$(VENV)/.installed-%: pyproject.toml constraints.txt | $(PYTHON)
	$(if $(and $(TORCH_INDEX),$(filter peers,$(subst $(comma), ,$(EXTRAS_$*)))),\
		$(PYTHON) -m pip install torch -c constraints.txt --index-url '$(TORCH_INDEX)')
	$(PYTHON) -m pip install -e '.[$(EXTRAS_$*)]' -c constraints.txt
	touch $@

# Remove the virtual environment, build artifacts and caches.
clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache docs/_build
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
