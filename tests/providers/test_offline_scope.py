"""The offline tier asks the one scope analysis (nbrefine.grounding.scope) what a scope binds and
reads: the cases its own copy got wrong (red before it was replaced), on real failures."""

from __future__ import annotations

from test_offline import first_fix


def test_a_read_in_a_comprehensions_first_iterable_is_a_read_in_the_function() -> None:
    # `range(total)` runs in f itself, before `total = ...`: the global is meant.
    code = (
        "total = 3\n"
        "def f():\n"
        "    squares = [x * x for x in range(total)]\n"
        "    total = sum(squares)\n"
        "    return total\n"
        "f()\n"
    )
    assert "    global total\n    squares =" in first_fix(code)


def test_a_walrus_in_a_comprehension_binds_in_the_function() -> None:
    code = (
        "def first_big(values):\n"
        "    if any((hit := v) > 2 for v in values):\n"
        "        return hitt\n"
        "first_big([1, 5])\n"
    )
    assert "        return hit\n" in first_fix(code)
