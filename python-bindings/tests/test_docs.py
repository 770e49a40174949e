"""The measured figures the docs show are their raw data's: every table of
docs/benchmarks.md and the README between table markers is what
bench/doc_tables.py makes from bench/results, and each page names only
tables it knows."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _doc_tables():
    spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "bench" / "doc_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["docs/benchmarks.md", "README.md"])
def test_tables_are_their_data(page):
    doc_tables = _doc_tables()
    text = (ROOT / page).read_text()
    names = [m.group(2) for m in doc_tables.BLOCK.finditer(text)]
    assert names, f"{page} has no generated tables"
    made = doc_tables.render(text)
    if made != text:
        import difflib
        diff = "".join(difflib.unified_diff(text.splitlines(True), made.splitlines(True),
                                            page, "from bench/results", n=0))
        pytest.fail(f"{page} differs from its data (python3 bench/doc_tables.py --write):\n"
                    + diff[:4000])


def test_a_changed_figure_is_caught(tmp_path):
    """A table cell edited by hand no longer matches."""
    doc_tables = _doc_tables()
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    at = text.index("<!-- table convert -->")
    cell = text.index("| LIFNode |", at)
    edited = text[:cell] + text[cell:].replace("0.", "9.", 1)
    assert doc_tables.render(edited) != edited
    assert doc_tables.render(edited) == text


def test_benchmarks_page_is_short():
    assert len((ROOT / "docs" / "benchmarks.md").read_text().splitlines()) < 300


def _program(page: str, cuda: bool) -> str:
    """`page`'s Python blocks in order, as one program: ```python blocks,
    and ```python cuda blocks where a GPU runs them."""
    import re
    text = (ROOT / page).read_text()
    wanted = {"python", "python cuda"} if cuda else {"python"}
    return "\n".join(code for info, code in re.findall(r"```(python[^\n]*)\n(.*?)```", text, re.S)
                     if info.strip() in wanted)


@pytest.mark.parametrize("page", ["README.md", "docs/python.md", "docs/convert.md",
                                  "docs/tutorial.md"])
def test_page_runs(page, tmp_path, monkeypatch):
    """A page's code, run as written (interop.md and deploy.md have tests of
    their own, tests/test_multistep.py and tests/test_export.py)."""
    import torch
    import warnings
    program = _program(page, torch.cuda.is_available())
    assert program.strip()
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(program, page, "exec"), {"__name__": "doc_page"})  # noqa: S102
