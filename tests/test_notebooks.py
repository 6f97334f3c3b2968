"""The notebook course: every notebook runs top to bottom in quick mode, and is committed clean.

Quick mode (``VECENVS_QUICK=1``) shrinks every grid and timing; the kernel is this venv's
``python3``. Each notebook runs with a temp folder as its working directory, and the autouse
fixture in conftest points ``VECENVS_STORE`` at a temp file, so nothing is written into the repo.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]-*.ipynb"))

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def test_the_course_is_there():
    assert len(NOTEBOOKS) >= 7, f"expected the numbered notebooks 01-07, found {[p.name for p in NOTEBOOKS]}"
    numbers = [int(path.name[:2]) for path in NOTEBOOKS]
    assert numbers == list(range(1, len(NOTEBOOKS) + 1)), f"numbering has gaps: {numbers}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_committed_without_outputs_and_with_the_project_kernel(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    spec = notebook.metadata.get("kernelspec", {})
    assert spec.get("name") == "python3" and spec.get("language") == "python", (
        f"{path.name}: kernelspec {spec!r}; expected the venv's python3 kernel")
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}, cell {index}: has outputs; clear them before committing "
                "(JupyterLab: Edit > Clear Outputs of All Cells)")
    assert "What to notice" in notebook.cells[-1].source, f"{path.name}: should end with 'What to notice'"


def test_python3_kernel_is_this_venv():
    """JupyterLab started from the venv runs the notebooks with the venv's Python."""
    argv = KernelSpecManager().get_kernel_spec("python3").argv
    # jupyter_client replaces a bare "python" with the Python running Jupyter, i.e. the venv's.
    assert argv[0] in ("python", "python3") or ".venv" in argv[0], argv


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_runs_top_to_bottom_in_quick_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("VECENVS_QUICK", "1")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=150, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"]
    assert not errors
    assert list(tmp_path.iterdir()) == [], f"{path.name} wrote into its working folder"
