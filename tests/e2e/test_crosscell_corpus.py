"""The cross-cell corpus (``tests/corpus/crosscell/``) through ``nbrefine fix`` in real kernels.

Each case is a notebook (a function cell and a checks cell from QuixBugs or HumanEvalFix, the
same as an nbgrader assignment with locked test cells, cascades, a name defined only below,
unchecked index edits) and scripted replies shaped as real models answer (a corrected function
above the unchanged asserts, labelled blocks, a whole cell, prose before and after, an invented
definition). The fix must land in the cell that causes the failure, the checks must stay
byte-identical, no symptom may be patched, and a guess nothing checks is a proposal.
``bench/crosscell_corpus.py`` prints the figures the README quotes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from crosscell_corpus import cases, run_case  # noqa: E402

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("clean_env")]

CASES = cases()


def test_the_corpus_has_every_kind() -> None:
    kinds = {case["kind"] for case in CASES}
    assert kinds == {"checked", "nbgrader", "cascade", "below", "unchecked"}
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_fix_lands_where_the_bug_is(case: dict, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert not outcome.problems, outcome.problems
    assert outcome.checks_kept
    assert outcome.proposal == (case["kind"] == "unchecked")
