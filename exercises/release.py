"""Build the student release: the course without its answers, as a folder to push as a template.

    python -m exercises.release OUT        # or: make release OUT=...

This repository is the instructor's copy. The release holds what students need (the package,
the notebooks, the dashboard, the question files, the public checks, the LICENSE, and a README
of its own for students, ``exercises/student_readme.md`` filled in from the policy: what to do,
how to check it, when and where to hand it in) and none of what only the instructor may see
(the solutions, the hidden checks, the grader and its policy, the instructor's guide), nor the
developers' side: the project's test suite, its changelog and contributing guide, the
Makefile's developer targets (``lint``, ``docs``, the suite's ``test``) and the instructor-only
blocks of the docs (``<!-- >>> instructor-only`` to ``<!-- <<< instructor-only -->``). Its own
check, ``make test``, is ``tests/test_lab.py``: whether the lab works on the student's machine,
which passes in a fresh release. It adds a GitHub Classroom autograding workflow that runs each
question's public checks, worth the points the policy gives them
(``.github/workflows/classroom.yml``, and the same tests in
``.github/classroom/autograding.json``).

The files come from git (tracked, or new and not ignored), so nothing ignored (a virtual
environment, collected submissions) can slip in. Before it finishes, the release is searched for
leaks (:func:`find_leaks`): a path that is instructor-only, a line of a solution, code that does
what a solution's function does whatever its names (:func:`shapes`), the name of a hidden check,
a Part B answer next to its question, text that speaks of the instructor's side
(:data:`INSTRUCTOR_TEXT`). It has no git history: create the template
repository from this folder (``git init``), never by forking or pushing the instructor's repository,
whose history holds the solutions.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import string
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path, PurePosixPath

from exercises.grading import policy
from exercises.grading.policy import Check, Policy

EXERCISES = Path(__file__).resolve().parent
REPO = EXERCISES.parent
#: What a release may hold at its top level; everything else in the repository stays out.
TOP_LEVEL = (
    "vecenvs",
    "notebooks",
    "exercises",
    "dashboard",
    "docs",
    "examples",  # your own env, measured: docs/your-env.md walks through it, tests use it
    "tests",  # only RELEASE_TESTS
    "Makefile",
    "README.md",
    "LICENSE",
    "CITATION.cff",
    "pyproject.toml",
    "constraints.txt",
    "environment.yml",
    ".gitignore",
)
#: The instructor's only: never in a release (a folder, and everything under it).
INSTRUCTOR_ONLY = (
    "exercises/solutions",
    "exercises/checks/hidden",
    "exercises/grading",
    "exercises/grade.py",
    "exercises/gradescope.py",
    "exercises/collect.py",
    "exercises/release.py",
    "exercises/policy.toml",
    "exercises/INSTRUCTORS.md",
    "tests/test_exercises.py",
    "tests/test_course.py",
    "tests/test_course_text.py",
    "exercises/student_readme.md",
    "tests/test_gradescope.py",
    "tests/test_collect.py",
    "tests/data/submissions",
)
#: Of ``tests/``, what a release holds: its own check (``make test`` there) and the recorded
#: profiles notebook 5 reads. The rest is the project's suite, which tests the repository.
RELEASE_TESTS = ("tests/test_lab.py", "tests/data/profiles")
#: Words that speak of the instructor's side, which no file of a release may say.
INSTRUCTOR_TEXT = re.compile(
    r"instructor's copy|reference solutions?\b|INSTRUCTORS\.md|\bmake (grade|release|gradescope|"
    r"collect)\b|exercises[./](grade|release|gradescope|collect|solutions)\b"
)
#: The release's README, for students (the repository's own README speaks to whoever works on
#: the course): a template whose ``$names`` :func:`student_readme` fills in from the policy.
STUDENT_README = EXERCISES / "student_readme.md"
#: Where question 6's sweep goes: the student's folder, the one the grader collects.
Q6_JSON = "exercises/student/q6_sweep.json"
#: The file that marks a folder as a release (so that building again may replace it).
MARKER = ".vecenvs-release"
#: The Makefile's instructor-only targets sit between these lines, and its header names them on
#: lines of their own: the release leaves both out.
MAKEFILE_BLOCK = re.compile(r"^# >>> instructor-only.*?^# <<< instructor-only[^\n]*\n", re.M | re.S)
MAKEFILE_HEADER_LINE = re.compile(
    r"^#\s+make (grade|release|gradescope|collect|docs|lint)\b[^\n]*\n", re.M
)
#: The developers' targets (the suite's ``make test``, ``lint``, ``docs``), between these lines;
#: the release has its own ``make test`` instead (:data:`RELEASE_TEST_TARGET`).
MAKEFILE_DEVELOPER_BLOCK = re.compile(
    r"^# >>> developer-only.*?^# <<< developer-only[^\n]*\n", re.M | re.S
)
MAKEFILE_TEST_LINE = re.compile(r"^#\s+make test\b[^\n]*\n", re.M)
RELEASE_TEST_TARGET = (
    "# Whether the lab works on this machine: the package, the data the notebooks read, and the\n"
    "# sandbox your checks run in (tests/test_lab.py). Not your answers: those are checked by\n"
    "# `.venv/bin/python -m pytest exercises/checks`.\n"
    "test: $(VENV)/.installed-lab\n"
    "\t$(PYTHON) -m pytest tests -p no:cacheprovider\n"
)
#: A Markdown file's instructor-only blocks sit between these lines.
MARKDOWN_BLOCK = re.compile(
    r"^<!-- >>> instructor-only.*?^<!-- <<< instructor-only -->[^\n]*\n", re.M | re.S
)
#: A question's command in the workflow: its public checks, without a cache in the student's repo.
PYTEST = "python -m pytest {path} -p no:cacheprovider"
#: Minutes each autograding step may take (a check itself stops after 30 s).
STEP_MINUTES = 10
SETUP = (
    "sudo apt-get install -y -qq bubblewrap || true; "
    "python -m pip install --quiet -e . pytest pytest-timeout"
)


class ReleaseError(RuntimeError):
    """The release cannot be built (or would leak); the message says why."""


def _is_instructor_only(path: PurePosixPath) -> bool:
    return _under(path, INSTRUCTOR_ONLY)


def _under(path: PurePosixPath, folders: tuple[str, ...]) -> bool:
    return any(path == PurePosixPath(p) or PurePosixPath(p) in path.parents for p in folders)


def git_files(repo: Path = REPO) -> list[PurePosixPath]:
    """The repository's regular files as git sees them: tracked, or new and not ignored (never
    a virtual environment or collected submissions), present on disk."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=repo,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise ReleaseError(
            f"{repo} must be a git checkout (the files taken are those git tracks): {error}"
        ) from None
    names = sorted(set(listing.decode("utf-8", "surrogateescape").split("\0")) - {""})
    return [
        PurePosixPath(name)
        for name in names
        if (repo / name).is_file() and not (repo / name).is_symlink()
    ]


def source_files(repo: Path = REPO) -> list[PurePosixPath]:
    """The repository's files that go into a release: :func:`git_files` under
    :data:`TOP_LEVEL`, not :data:`INSTRUCTOR_ONLY`."""
    return [
        path
        for path in git_files(repo)
        if path.parts[0] in TOP_LEVEL
        and not _is_instructor_only(path)
        and (path.parts[0] != "tests" or _under(path, RELEASE_TESTS))
    ]


@dataclass(frozen=True)
class AutogradingTest:
    """One question's public checks as a GitHub Classroom test: it passes when they all pass.
    (Classroom scores a test all or nothing; one per question keeps a student's run to six
    pytest starts, and the log of each says which of its checks failed and why.)"""

    question: str
    title: str
    path: str  # the question's check file, from the release's root
    checks: tuple[Check, ...]
    points: float

    @property
    def id(self) -> str:
        """The step's id, the question's (the reporter reads ``Q1_RESULTS``)."""
        return self.question

    @property
    def name(self) -> str:
        return f"{self.question}: {self.title} ({len(self.checks)} checks)"

    @property
    def command(self) -> str:
        return PYTEST.format(path=self.path)


def autograding_tests(
    rules: Policy, checks_folder: Path = EXERCISES / "checks"
) -> list[AutogradingTest]:
    """One test per question, in the policy's order, worth its public checks' points."""
    files = {}
    for path in sorted(checks_folder.glob("test_q*_*.py")):
        question = re.match(r"test_(q\d+)_", path.name)
        if question:
            files[question.group(1)] = f"exercises/checks/{path.name}"
    tests = []
    for question in rules.questions.values():
        if question.public:
            if question.id not in files:
                raise ReleaseError(f"no public check file for {question.id} in {checks_folder}")
            checks = tuple(check for check in question.checks() if not check.hidden)
            tests.append(
                AutogradingTest(
                    question.id, question.title, files[question.id], checks, question.public_points
                )
            )
    return tests


def _yaml_text(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(text)


def classroom_workflow(tests: list[AutogradingTest], rules: Policy) -> str:
    """``.github/workflows/classroom.yml``: GitHub Classroom's autograding workflow, one
    command-grader step per question, then the reporter."""
    lines = [
        "# The public checks, by question, with their points: written by the course's release builder",
        "# from the instructor's policy. Change the policy and build the release again rather",
        "# than editing this file. The points here are feedback for students: the grade comes",
        "# from the instructor's grader, which also runs hidden checks.",
        "name: Autograding Tests",
        "on: [push, repository_dispatch]",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "      - name: Checkout code",
        "        uses: actions/checkout@v4",
        "      - name: Set up Python",
        "        uses: actions/setup-python@v5",
        "        with:",
        '          python-version: "3.11"',
        "      - name: Install the lab",
        f"        run: {_yaml_text(SETUP)}",
    ]
    for test in tests:
        lines += [
            f"      - name: {_yaml_text(test.name)}",
            f"        id: {test.id}",
            "        uses: classroom-resources/autograding-command-grader@v1",
            "        with:",
            f"          test-name: {_yaml_text(test.name)}",
            '          setup-command: ""',
            f"          command: {_yaml_text(test.command)}",
            f"          timeout: {STEP_MINUTES}",
            f"          max-score: {test.points:g}",
        ]
    lines += [
        "      - name: Autograding Reporter",
        "        uses: classroom-resources/autograding-grading-reporter@v1",
        "        env:",
        *(
            f'          {test.id.upper()}_RESULTS: "${{{{steps.{test.id}.outputs.result}}}}"'
            for test in tests
        ),
        "        with:",
        f"          runners: {','.join(test.id for test in tests)}",
    ]
    return "\n".join(lines) + "\n"


def autograding_json(tests: list[AutogradingTest]) -> str:
    """``.github/classroom/autograding.json``: the same tests in Classroom's older format."""
    entries = [
        {
            "name": test.name,
            "setup": SETUP if index == 0 else "",
            "run": test.command,
            "input": "",
            "output": "",
            "comparison": "included",
            "timeout": STEP_MINUTES,
            "points": test.points,
        }
        for index, test in enumerate(tests)
    ]
    return json.dumps({"tests": entries}, indent=2) + "\n"


def _points(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def _due_sentence(late: policy.LatePolicy) -> str:
    """When the work is due and what lateness costs, from the policy's ``[course]`` and
    ``[late]``."""
    if late.due is None:
        return "Your instructor tells you when the work is due."
    due = late.due.strftime("%Y-%m-%d %H:%M") + (
        " UTC" if late.due.utcoffset() == timedelta(0) else late.due.strftime(" UTC%z")
    )
    sentence = f"Due **{due}**."
    grace = late.grace.total_seconds() / 60
    after = f"after that (with {grace:g} minutes' grace)" if grace else "after that"
    if late.per_day > 0:
        sentence += (
            f" Work handed in {after} loses {late.per_day:.0%} of its points for each day late,"
            " a day begun counting as a whole one"
        )
        sentence += (
            f", and scores nothing more than {late.last_day} days late." if late.last_day else "."
        )
    elif late.last_day:
        sentence += f" Work handed in more than {late.last_day} days late scores nothing."
    return sentence


def student_readme(rules: Policy, template: Path = STUDENT_README) -> str:
    """The release's ``README.md``: what to do, how to check it, where to hand it in, with the
    course's title, questions, points and due date from the policy."""
    rows = []
    for question in rules.questions.values():
        stubs = sorted((EXERCISES / "student").glob(f"{question.id}_*.py"))
        file = f"`exercises/student/{stubs[0].name}`" if stubs else "-"
        hidden = question.max_points - question.public_points
        points = f"{question.max_points:g}: {question.public_points:g} from the checks you run"
        points += f", {hidden:g} from hidden checks" if hidden else ""
        rows.append(f"| {question.id}: {question.title} | {file} | {points} |")
    for part in rules.manual.values():
        rows.append(f"| {part.title} | read by your instructor | {part.points:g} |")
    try:
        return string.Template(template.read_text()).substitute(
            title=rules.title,
            questions="\n".join(rows),
            total=f"In all, {_points(rules.max_points)}.",
            due=_due_sentence(rules.late),
            q6_json=Q6_JSON,
        )
    except (KeyError, ValueError) as error:
        raise ReleaseError(f"{template}: a $name the release does not fill in: {error}") from None


def _prepare(out: Path) -> None:
    """Makes ``out`` an empty folder: a new one, an empty one, or an earlier release."""
    out = out.resolve()
    if REPO.is_relative_to(out):
        raise ReleaseError(f"{out}: the release cannot go there (it would overwrite the course)")
    if out.is_relative_to(REPO):
        ignored = subprocess.run(["git", "check-ignore", "-q", str(out)], cwd=REPO, check=False)
        if ignored.returncode != 0:
            raise ReleaseError(
                f"{out} is inside the repository and not ignored by git, so the next release "
                "would copy this one: use a folder outside it, or student-release/ (ignored)"
            )
    if out.exists():
        if not out.is_dir():
            raise ReleaseError(f"{out} exists and is not a folder")
        if any(out.iterdir()):
            if not (out / MARKER).is_file():
                raise ReleaseError(
                    f"{out} is not empty and not an earlier release: choose a new or empty folder"
                )
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def release_makefile(text: str) -> str:
    """The repository's Makefile as a release has it: no instructor's or developers' targets,
    and its own ``make test``, the lab's check."""
    if not MAKEFILE_DEVELOPER_BLOCK.search(text):
        raise ReleaseError("the Makefile has no '# >>> developer-only' block to leave out")
    text = MAKEFILE_BLOCK.sub("", text)
    text = MAKEFILE_DEVELOPER_BLOCK.sub(RELEASE_TEST_TARGET + "\n", text)
    text = MAKEFILE_TEST_LINE.sub(
        "#   make test       whether the lab works here (your answers: pytest exercises/checks)\n",
        text,
    )
    return MAKEFILE_HEADER_LINE.sub("", text)


def build(out: Path, rules: Policy | None = None, repo: Path = REPO) -> list[PurePosixPath]:
    """Writes the release into ``out``; returns the files written. Raises ReleaseError when it
    cannot, or when :func:`find_leaks` finds anything in it (the folder is then removed)."""
    rules = rules or policy.load()
    tests = autograding_tests(rules)
    files = source_files(repo)
    _prepare(out)
    try:
        for path in files:
            if path == PurePosixPath("README.md"):
                continue  # the release has its own, for students (below)
            target = out / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path == PurePosixPath("Makefile"):
                target.write_text(release_makefile((repo / path).read_text()))
            elif path.suffix == ".md":
                target.write_text(MARKDOWN_BLOCK.sub("", (repo / path).read_text()))
            else:
                shutil.copy2(repo / path, target)
        generated = {
            PurePosixPath("README.md"): student_readme(rules),
            PurePosixPath(".github/workflows/classroom.yml"): classroom_workflow(tests, rules),
            PurePosixPath(".github/classroom/autograding.json"): autograding_json(tests),
            PurePosixPath(MARKER): "A student release of the vecenvs course, built by "
            "`python -m exercises.release`.\n",
        }
        for path, text in generated.items():
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            (out / path).write_text(text)
        leaks = find_leaks(out)
        if leaks:
            raise ReleaseError("the release would leak:\n  " + "\n  ".join(leaks[:20]))
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return sorted({*files, *generated})


# ------------------------------------------------------------------------------------------------
# Leaks
# ------------------------------------------------------------------------------------------------

#: Solution lines shorter than this are too common to mean anything (``return chunks``).
SOLUTION_LINE_CHARS = 30


def _text_files(folder: Path) -> dict[Path, str]:
    texts = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix not in (".png", ".jpg", ".svg", ".sqlite"):
            try:
                texts[path] = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
    return texts


def _scaffolding(exercises: Path) -> list[Path]:
    """What the course gives every student on purpose to start from: the question files and
    ``pipe_env.py``. (The sandbox and the package are searched like the rest of the release.)"""
    return [*(exercises / "student").glob("*.py"), exercises / "pipe_env.py"]


def _solution_lines(exercises: Path) -> set[str]:
    """The distinctive code lines of the solutions: not comments or imports, and in none of the
    files every student starts from (:func:`_scaffolding`) nor in the ``vecenvs`` package, the
    course's reading, whose idioms the answers use (``deadline = time.perf_counter() +
    seconds``). Whole functions and blocks are compared everywhere, the package included, by
    what they do (:func:`shapes`)."""
    shared = [*_scaffolding(exercises), *(exercises.parent / "vecenvs").rglob("*.py")]
    common = {line.strip() for path in shared for line in path.read_text().splitlines()}
    found = set()
    for path in (exercises / "solutions").glob("*.py"):
        for line in path.read_text().splitlines():
            line = line.strip()
            if (
                len(line) >= SOLUTION_LINE_CHARS
                and line not in common
                and not line.startswith(("#", '"""', "import ", "from "))
            ):
                found.add(line)
    return found


#: The fewest AST nodes a function (or a loop, ``try``, ``with`` or ``if`` inside one) of a
#: solution must have for its shape to count: smaller ones (``return sorted(x)``) are everywhere.
SHAPE_NODES = 25


class _Normalise(ast.NodeTransformer):
    """Code as what it does: docstrings and annotations dropped, every name (variables,
    arguments, functions) renamed ``v0, v1...`` in order of first use, every constant replaced
    by its type. Attribute and keyword names stay (``pipe.send``, ``timeout=``): they are what a
    piece of code calls, not what it was named."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            body = body[1:] or [ast.Pass()]  # the docstring
        return body

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name, node.returns, node.decorator_list = self._name(node.name), None, []
        node.body = self._body(node.body)
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(self._name(node.id), ast.Load())

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(type(node.value).__name__)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        assign = ast.Assign([node.target], node.value or ast.Constant(None))
        return self.generic_visit(assign)


def _shape(node: ast.AST) -> str:
    """``node`` normalised (:class:`_Normalise`), as text; the original is left as it was."""
    copy = ast.parse(ast.unparse(node)).body[0] if isinstance(node, ast.stmt) else node
    return ast.dump(_Normalise().visit(copy), annotate_fields=False)


def shapes(source: str, where: str) -> dict[str, str]:
    """The shape of every function in ``source`` and of every loop, ``try``, ``with`` and
    ``if`` inside one, of at least :data:`SHAPE_NODES` nodes: shape -> where it is
    (``"file.py: careful_worker"``). Code that does not parse has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    found: dict[str, str] = {}
    blocks = (ast.For, ast.While, ast.Try, ast.With, ast.If)
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if (node is function or isinstance(node, blocks)) and sum(
                1 for _ in ast.walk(node)
            ) >= SHAPE_NODES:
                try:
                    found.setdefault(_shape(node), f"{where}: {function.name}")
                except (SyntaxError, ValueError, RecursionError):
                    continue
    return found


def _solution_shapes(exercises: Path) -> dict[str, str]:
    """The shapes (:func:`shapes`) of the solutions' functions, but those the scaffolding has."""
    given = {
        shape for path in _scaffolding(exercises) for shape in shapes(path.read_text(), path.name)
    }
    found: dict[str, str] = {}
    for path in sorted((exercises / "solutions").glob("*.py")):
        for shape, where in shapes(path.read_text(), path.name).items():
            if shape not in given:
                found.setdefault(shape, where)
    return found


def _code_of(path: Path, text: str) -> list[str]:
    """The Python in a release's file: a ``.py`` file, or a notebook's code cells."""
    if path.suffix == ".py":
        return [text]
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
        except (ValueError, AttributeError):
            return []
        sources = [cell.get("source", "") for cell in cells if isinstance(cell, dict)]
        return ["".join(s) if isinstance(s, list) else str(s) for s in sources]
    return []


def _hidden_check_names(exercises: Path) -> set[str]:
    return {
        node.name
        for path in (exercises / "checks" / "hidden").glob("test_*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def answers(exercises: Path = EXERCISES) -> dict[str, object]:
    """Part B's answers: each name a student file sets to ``None`` for the student to fill in,
    with the value the solution gives it (text or a number). Question 6's are the student's own
    measurements, not answers."""
    found: dict[str, object] = {}
    for stub in sorted((exercises / "student").glob("q*.py")):
        solution = exercises / "solutions" / stub.name
        if stub.name.startswith("q6_") or not solution.is_file():
            continue
        holes = {
            target.id
            for node in ast.parse(stub.read_text()).body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value is None
            for target in node.targets
            if isinstance(target, ast.Name) and target.id.isupper()
        }
        namespace: dict[str, object] = {}
        code = compile(solution.read_text(), str(solution), "exec")
        exec(code, namespace)  # the instructor's own solution file, trusted
        for name in holes:
            value = namespace.get(name)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                found[name] = value
    return found


def find_leaks(folder: Path, exercises: Path = EXERCISES) -> list[str]:
    """What in ``folder`` (a release) gives away what only the instructor may see: instructor-only
    paths, lines of the solutions, code that does what a solution's function (or a loop or
    ``try`` in one) does, whatever its names, comments and constants (:func:`shapes`), names of
    hidden checks, a Part B answer on the line of its name, or compared with in the exercises,
    and text that speaks of the instructor's side (:data:`INSTRUCTOR_TEXT`). Empty when nothing
    is found."""
    leaks = []
    for path in sorted(folder.rglob("*")):
        relative = PurePosixPath(path.relative_to(folder).as_posix())
        if _is_instructor_only(relative) or path.name in ("solutions", "hidden"):
            leaks.append(f"{relative}: instructor-only")
    lines = _solution_lines(exercises)
    public = {
        node.name
        for path in (exercises / "checks").glob("test_*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef)
    }
    hidden = re.compile(r"\b(" + "|".join(sorted(_hidden_check_names(exercises) - public)) + r")\b")
    said = []
    for name, value in answers(exercises).items():
        if isinstance(value, str):
            # Text answers (a letter, a category) are said by an assignment or a comparison;
            # the letters themselves are everywhere (the options a, b, c...).
            forms = "|".join(re.escape(form) for form in {repr(value), json.dumps(value)})
            pattern = re.compile(rf"(\b{re.escape(name)}\s*=|==)\s*({forms})(?!\w)")
        else:  # a number is said when it stands on its name's line
            forms = "|".join(re.escape(form) for form in {f"{value:g}", repr(value)})
            pattern = re.compile(rf"\b{re.escape(name)}\b.*(?<![\w.])({forms})(?![\w.])")
        said.append((name, pattern))
    solution_shapes = _solution_shapes(exercises)
    for path, text in _text_files(folder).items():
        relative = path.relative_to(folder)
        in_exercises = relative.parts[0] == "exercises"
        for code in _code_of(path, text):
            for shape, where in shapes(code, str(relative)).items():
                if shape in solution_shapes:
                    leaks.append(f"{where}: does what {solution_shapes[shape]} does")
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            where = f"{relative}:{number}"
            if stripped in lines:
                leaks.append(f"{where}: a line of a solution: {stripped[:80]}")
            if hidden.pattern != r"\b()\b" and hidden.search(line):
                leaks.append(f"{where}: names a hidden check")
            for name, pattern in said:
                match = pattern.search(line)
                # (``==`` alone counts in the exercises only: elsewhere it compares other things)
                if match and (in_exercises or not match.group(1).startswith("==")):
                    leaks.append(f"{where}: gives away {name}")
            instructor = INSTRUCTOR_TEXT.search(line)
            if instructor and relative.name != MARKER:
                leaks.append(f"{where}: speaks of the instructor's side ({instructor.group(0)})")
    return sorted(set(leaks))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.release", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "out",
        type=Path,
        help="the folder to write the release into (new, empty, or an earlier release)",
    )
    parser.add_argument(
        "--policy",
        type=Path,
        default=policy.DEFAULT,
        help="the points and policy (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        rules = policy.load(args.policy)
        files = build(args.out, rules)
    except (policy.PolicyError, ReleaseError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    tests = autograding_tests(rules)
    print(f"wrote {len(files)} files to {args.out.resolve()}")
    checks = sum(len(test.checks) for test in tests)
    print(
        f"autograding: {len(tests)} questions, {checks} public checks, {sum(t.points for t in tests):g} points"
    )
    print("no solution, hidden check or answer found in it. Next: see exercises/INSTRUCTORS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
