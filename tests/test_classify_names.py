"""The profiler follows the code: every function a classification rule names exists.

:mod:`vecenvs.profile.classify` sorts py-spy's frames by the names of vecenvs' own functions
(``wait`` is waiting, ``write_observations`` is shared-memory I/O...). A function renamed in the
core without its rule would silently move its samples to "bookkeeping"; this test makes the
rename fail here instead. The only names allowed to be missing are the old ones that the
committed recordings use, and only while a recording still uses them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import vecenvs
from vecenvs.profile.classify import RECORDED_NAMES, RULES

ROOT = Path(vecenvs.__file__).resolve().parent.parent
RECORDINGS = ROOT / "tests" / "data" / "profiles"


def _defined_in(module_path: str) -> set[str]:
    """Every function and method of a module, by name and by ``Class.method``."""
    tree = ast.parse((ROOT / module_path).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names |= {item.name, f"{node.name}.{item.name}"}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
    return names


OUR_RULES = [
    rule
    for rule in RULES
    if rule.functions and any(file.startswith("vecenvs/") for file in rule.files)
]


def test_some_rules_name_vecenvs_functions():
    assert len(OUR_RULES) >= 5  # waiting, sleeping, the async wait, pickling, shared memory...


@pytest.mark.parametrize("rule", OUR_RULES, ids=lambda rule: rule.why[:40])
def test_every_function_a_rule_names_is_defined_in_the_files_it_names(rule):
    defined = set().union(
        *(_defined_in(file) for file in rule.files if file.startswith("vecenvs/"))
    )
    missing = [
        name for name in rule.functions if name not in defined and name not in RECORDED_NAMES
    ]
    assert not missing, (
        f"the rule {rule.why!r} names {missing}, which {rule.files} do not define: "
        "rename them in vecenvs/profile/classify.py too"
    )


def test_the_old_names_are_gone_from_the_code_and_still_in_a_recording():
    recordings = " ".join(path.read_text() for path in RECORDINGS.glob("*") if path.is_file())
    everything = set().union(
        *(_defined_in(f"vecenvs/{p.name}") for p in (ROOT / "vecenvs").glob("*.py"))
    )
    for name in RECORDED_NAMES:
        assert name not in everything, f"{name} exists again: take it off RECORDED_NAMES"
        used = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", recordings)  # not read_message's
        assert used, f"no recording uses {name} any more: take it off RECORDED_NAMES"


def test_a_renamed_function_fails(monkeypatch):
    """The check above bites: a rule naming a function that no file defines is caught."""
    from vecenvs.profile.classify import Rule

    rule = Rule(
        "waiting", "a renamed wait", files=("vecenvs/doorbell.py",), functions=("wait_old",)
    )
    with pytest.raises(AssertionError, match="wait_old"):
        test_every_function_a_rule_names_is_defined_in_the_files_it_names(rule)
