"""The reply splitter: which cells a model's reply changes, for every layout real models use."""

from __future__ import annotations

import pytest

from nbrefine.engine.cells import CellRef
from nbrefine.engine.reply import split_reply

SEARCH = '''\
def search(arr, x):
    """The index of x in the sorted list arr, or -1.

    >>> search([1, 3, 5], 5)
    2
    """
    lo, hi = 0, len(arr) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if arr[mid] < x:
            lo = mid + 1
        elif arr[mid] > x:
            hi = mid - 1
        else:
            return mid
    return -1'''

SEARCH_FIXED = SEARCH.replace("while lo < hi:", "while lo <= hi:")

CHECKS = """\
assert search([1, 3, 5], 5) == 2
assert search([1, 3, 5], 4) == -1
assert search([], 1) == -1"""

GCD = """\
def gcd(a, b):
    if b:
        return gcd(a % b, b)
    else:
        return a"""

GCD_FIXED = """\
def gcd(a, b):
    if b:
        return gcd(b, a % b)
    else:
        return a"""

BITCOUNT = """\
def bitcount(n):
    count = 0
    while n:
        n ^= n - 1
        count += 1
    return count"""

BITCOUNT_FIXED = BITCOUNT.replace("n ^= n - 1", "n &= n - 1")


def cell(key: str, source: str, role: str = "cause", count: int | None = None, **kw: object) -> CellRef:
    return CellRef(key=key, source=source, role=role, count=count, cell_id=key, **kw)  # type: ignore[arg-type]


def search_cells(checks: str = CHECKS) -> list[CellRef]:
    return [
        cell("search", SEARCH, "cause", 1, defines=("search",)),
        cell("checks", checks, "failing", 2, readonly="a cell of checks"),
    ]


def fenced(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code}\n```"


# --------------------------------------------------------------------------- the checks cell


def test_a_corrected_function_above_unchanged_asserts_changes_only_the_function_cell():
    reply = (
        "The asserts call `search`, which stops one step early: with `while lo < hi` the loop never "
        "looks at the last candidate, so `search([1, 3, 5], 5)` returns -1. Letting the loop run while "
        "`lo <= hi` fixes it; the asserts stay as they are.\n\n"
        f"{fenced(SEARCH_FIXED + chr(10) * 3 + CHECKS)}\n\n"
        "All three asserts pass with this version."
    )
    edits = split_reply(reply, search_cells())
    assert edits.changes == {"search": SEARCH_FIXED}
    assert edits.touched_readonly == ()
    assert edits.reason is None and not edits.declined
    assert "stops one step early" in edits.explanation and "All three asserts pass" in edits.explanation
    assert "```" not in edits.explanation and "def search" not in edits.explanation


def test_changed_asserts_next_to_the_function_are_reported_as_touching_the_checks():
    weakened = CHECKS.replace("assert search([], 1) == -1", "# the empty list is not supported")
    reply = (
        "The loop condition skips the last index, and an empty list cannot be searched at all. "
        "I fixed the loop and dropped the check on the empty list.\n\n"
        f"{fenced(SEARCH_FIXED + chr(10) * 2 + weakened)}"
    )
    edits = split_reply(reply, search_cells())
    assert edits.changes == {"search": SEARCH_FIXED}
    assert edits.touched_readonly == ("checks",)


def test_rewritten_asserts_alone_touch_the_checks_and_change_nothing():
    reply = (
        "The expected index is wrong: 5 sits at index 2, but the search returns -1 for it. "
        "Adjusting the expectation:\n\n" + fenced(CHECKS.replace("== 2", "== -1"))
    )
    edits = split_reply(reply, search_cells())
    assert edits.changes == {}
    assert edits.touched_readonly == ("checks",)
    assert edits.reason == "the reply changed only cells it may not change (the checks)"


# --------------------------------------------------------------------------- labels


def test_a_labelled_reply_with_one_block_per_cell():
    main = "data = [42, 4, 15, 8, 23, 16]\nprint(search(data, 42))"
    main_fixed = "data = sorted([42, 4, 15, 8, 23, 16])\nprint(search(data, 42))"
    cells = [
        cell("search", SEARCH, "cause", 1, defines=("search",)),
        cell("main", main, "failing", 2),
    ]
    reply = (
        "Two things go wrong. `search` never examines the last candidate, and `main` searches a list "
        "that is not sorted, which a binary search requires.\n\n"
        "### In [1] (cell 'search')\n\n"
        f"{fenced(SEARCH_FIXED)}\n\n"
        "### In [2] (cell 'main')\n\n"
        f"{fenced(main_fixed)}\n"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"search": SEARCH_FIXED, "main": main_fixed}
    assert edits.touched_readonly == () and edits.reason is None


def test_label_comments_on_the_first_line_are_dropped_and_other_comments_kept():
    main = "data = [42, 4, 15]\nprint(search(data, 42))"
    cells = [
        cell("search", SEARCH, "cause", 1, defines=("search",)),
        cell("main", main, "failing", 2),
    ]
    body_main = "# %% In [2] (cell 'main')\n# binary search needs a sorted list\ndata = sorted([42, 4, 15])\n"
    body_main += "print(search(data, 42))"
    reply = (
        "The loop misses the last element, and the data must be sorted first. Both cells change:\n\n"
        f"{fenced('# In [1]' + chr(10) + SEARCH_FIXED)}\n\n{fenced(body_main)}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes["search"] == SEARCH_FIXED
    assert edits.changes["main"] == (
        "# binary search needs a sorted list\ndata = sorted([42, 4, 15])\nprint(search(data, 42))"
    )


def test_one_block_with_percent_markers_for_two_cells():
    cells = [
        cell("search", SEARCH, "cause", 1, defines=("search",)),
        cell("checks", CHECKS, "failing", 2, readonly="a cell of checks"),
    ]
    reply = (
        "Only the function needs to change; I show both cells so you can see the checks still hold.\n\n"
        f"{fenced('# %% In [1]' + chr(10) + SEARCH_FIXED + chr(10) * 2 + '# %% In [2]' + chr(10) + CHECKS)}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"search": SEARCH_FIXED}
    assert edits.touched_readonly == ()


def test_a_label_by_cell_id_alone_sends_the_block_to_a_cell_not_run_yet():
    cells = [
        cell("report", "print(len(rows))", "failing", 4),
        cell("setup", "rows = load_rows('data.csv')", "moved", None),
    ]
    fixed = "import csv\n\nwith open('data.csv') as f:\n    rows = list(csv.DictReader(f))"
    reply = (
        "`rows` does not exist yet: the cell that reads the file is below this one and never ran, and "
        "`load_rows` is not defined anywhere. Cell 'setup' should read the file with the csv module:\n\n"
        f"{fenced(fixed)}\n\nRun it before the report cell."
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"setup": fixed}
    assert not edits.declined


def test_a_label_on_the_fence_line_and_a_bold_label():
    cells = [
        cell("gcd", GCD, "cause", 3, defines=("gcd",)),
        cell("bits", BITCOUNT, "cause", 4, defines=("bitcount",)),
        cell("checks", "assert gcd(35, 21) == 7\nassert bitcount(127) == 7", "failing", 5, readonly="checks"),
    ]
    reply = (
        "Both helpers are wrong. `gcd` recurses with its arguments in the wrong order, and `bitcount` "
        "clears with xor instead of and.\n\n"
        f"```python In [3]\n{GCD_FIXED}\n```\n\n**In [4]**\n{fenced(BITCOUNT_FIXED)}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"gcd": GCD_FIXED, "bits": BITCOUNT_FIXED}


@pytest.mark.parametrize(
    ("above", "first_line"),
    [
        ("### In [6] (cell 'tidy-up')", ""),
        ("**In [6]**", ""),
        ("In[6]:", ""),
        ("Cell 'tidy-up':", ""),
        ("The second change goes in the cell `tidy-up`:", ""),
        ("cell tidy-up", ""),
        ("Then:", "# In [6]"),
        ("Then:", "# %% In [6] (cell 'tidy-up')"),
        ("Then:", "# cell 'tidy-up'"),
    ],
)
def test_every_label_layout_names_the_cell(above: str, first_line: str):
    cells = [
        cell("load", "frame = read_table('a.tsv')", "failing", 5),
        cell("tidy-up", "frame = frame.dropna()", "dependent", 6),
    ]
    code = f"{first_line}\n# keep rows with a name\nframe = frame.dropna(subset=['name'])".lstrip()
    reply = (
        "`read_table` is pandas' and needs its module prefix; the next cell then drops every row with any "
        "missing value, which empties the table. First:\n\n"
        f"{fenced('import pandas as pd' + chr(10) * 2 + 'frame = pd.read_table(' + repr('a.tsv') + ')')}\n\n"
        f"{above}\n\n{fenced(code)}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {
        "load": "import pandas as pd\n\nframe = pd.read_table('a.tsv')",
        "tidy-up": "# keep rows with a name\nframe = frame.dropna(subset=['name'])",
    }


# --------------------------------------------------------------------------- unlabelled blocks


def test_a_block_per_function_goes_to_each_defining_cell():
    cells = [
        cell("gcd", GCD, "cause", 1, defines=("gcd",)),
        cell("bits", BITCOUNT, "cause", 2, defines=("bitcount",)),
        cell("checks", "assert gcd(35, 21) == 7\nassert bitcount(127) == 7", "failing", 3, readonly="checks"),
    ]
    reply = (
        "Both asserts fail because of the helpers, not the checks. `gcd` must recurse on `(b, a % b)`:\n\n"
        f"{fenced(GCD_FIXED)}\n\n"
        "and `bitcount` must clear the lowest set bit with `&=`, not flip bits with `^=`:\n\n"
        f"{fenced(BITCOUNT_FIXED)}\n"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"gcd": GCD_FIXED, "bits": BITCOUNT_FIXED}
    assert edits.touched_readonly == ()


def test_an_unlabelled_whole_cell_is_the_failing_cell():
    failing = "prices = {'a': 3, 'b': 5}\nshare = {k: v / sum(prices) for k, v in prices.items()}\nshare"
    fixed = (
        "prices = {'a': 3, 'b': 5}\nshare = {k: v / sum(prices.values()) for k, v in prices.items()}\nshare"
    )
    cells = [cell("c7", failing, "failing", 7)]
    reply = (
        "`sum(prices)` adds up the dictionary's keys, which are strings, hence the TypeError. "
        "Summing `prices.values()` gives the total the shares need.\n\n"
        f"{fenced(fixed)}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"c7": fixed}


def test_an_unlabelled_block_for_a_readonly_failing_cell_goes_to_the_closest_editable_cell():
    cells = [
        cell("values", "values = [5, 3, 1, 4]", "cause", 1),
        cell("checks", "assert search(values, 4) == 2", "failing", 3, readonly="checks"),
    ]
    reply = "`search` needs a sorted list, and `values` is not sorted. Sort it where it is made:\n\n"
    reply += fenced("values = sorted([5, 3, 1, 4])")
    assert split_reply(reply, cells).changes == {"values": "values = sorted([5, 3, 1, 4])"}
    nothing = split_reply("Try this instead:\n\n" + fenced("print('hello')"), cells)
    assert nothing.changes == {} and nothing.reason == "the reply's code matched no cell it may change"


def test_a_decorated_function_and_a_class_replace_their_definitions_in_place():
    tools = (
        "import functools\n\n\n"
        "# Fibonacci, memoised\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n\n"
        "class Stack:\n"
        "    def __init__(self):\n"
        "        self.items = []\n\n"
        "    def push(self, x):\n"
        "        self.items.insert(0, x)\n\n"
        "    def pop(self):\n"
        "        return self.items.pop()\n\n\n"
        "LIMIT = 30  # keep the recursion shallow"
    )
    checks = "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert fib(10) == 55"
    cells = [
        cell("tools", tools, "cause", 1, defines=("fib", "Stack")),
        cell("checks", checks, "failing", 2, readonly="checks"),
    ]
    new_fib = (
        "# Fibonacci, memoised (n >= 0)\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)"
    )
    new_stack = (
        "class Stack:\n"
        '    """Last in, first out."""\n\n'
        "    def __init__(self):\n"
        "        self.items = []\n\n"
        "    def push(self, x):\n"
        "        self.items.append(x)  # the top is the end of the list\n\n"
        "    def pop(self):\n"
        "        return self.items.pop()"
    )
    reply = (
        "`push` inserts at the front while `pop` takes from the end, so the stack behaves like a queue. "
        "Appending in `push` makes both ends agree; I also noted that `fib` expects n >= 0.\n\n"
        f"{fenced(new_fib + chr(10) * 3 + new_stack + chr(10) * 3 + checks)}"
    )
    edits = split_reply(reply, cells)
    new = edits.changes["tools"]
    assert new == (
        "import functools\n\n\n"
        + new_fib
        + "\n\n\n"
        + new_stack
        + "\n\n\nLIMIT = 30  # keep the recursion shallow"
    )
    assert new.count("@functools.lru_cache") == 1 and new.count("# Fibonacci") == 1
    assert edits.touched_readonly == ()


def test_only_the_replaced_function_of_a_two_function_cell_changes():
    lcm = (
        "def lcm(a, b):   \n    # uses gcd above\n    return a * b // gcd(a, b)\n\n\nprint('helpers ready')  "
    )
    helpers = GCD + "\n\n\n" + lcm
    cells = [
        cell("helpers", helpers, "cause", 1, defines=("gcd", "lcm")),
        cell("checks", "assert gcd(35, 21) == 7\nassert lcm(4, 6) == 12", "failing", 2, readonly="checks"),
    ]
    reply = (
        "`gcd` swaps its arguments the wrong way round and recurses forever once `b` exceeds `a`. "
        "The recursive call should be `gcd(b, a % b)`:\n\n"
        f"{fenced(GCD_FIXED + chr(10) * 3 + 'assert gcd(35, 21) == 7' + chr(10) + 'assert lcm(4, 6) == 12')}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"helpers": GCD_FIXED + "\n\n\n" + lcm}  # lcm kept byte for byte


def test_a_defining_cell_that_does_not_parse():
    broken = (
        "def gcd(a, b):\n    if b\n        return gcd(a % b, b)\n    return a\n\n\n"
        "# least common multiple\ndef lcm(a, b):\n    return a * b // gcd(a, b)\n"
    )
    cells = [
        cell("helpers", broken, "cause", 1, defines=("gcd", "lcm")),
        cell("checks", "assert gcd(35, 21) == 7", "failing", 2, readonly="checks"),
    ]
    prose = "The cell that defines `gcd` has a syntax error (a missing colon) and recurses the wrong way. "
    edits = split_reply(prose + "Fixed:\n\n" + fenced(GCD_FIXED + "\n\n\nassert gcd(35, 21) == 7"), cells)
    assert edits.changes == {"helpers": broken.replace(broken[: broken.index("\n\n\n")], GCD_FIXED)}
    lcm = "def lcm(a, b):\n    return abs(a * b) // gcd(a, b)"
    both = split_reply(prose + "Both functions:\n\n" + fenced(GCD_FIXED + "\n\n\n" + lcm), cells)
    assert both.changes == {"helpers": GCD_FIXED + "\n\n\n" + lcm}


def test_an_import_and_a_new_helper_travel_with_the_function():
    cells = [
        cell("search", SEARCH, "cause", 1, defines=("search",)),
        cell("checks", CHECKS, "failing", 2, readonly="checks"),
    ]
    code = (
        "import bisect\n\n\n"
        "def _index(arr, x):\n    return bisect.bisect_left(arr, x)\n\n\n"
        "def search(arr, x):\n    i = _index(arr, x)\n"
        "    return i if i < len(arr) and arr[i] == x else -1\n\n\n" + CHECKS
    )
    reply = "Rather than patch the loop, use the standard library's `bisect`, which handles the ends:\n\n"
    edits = split_reply(reply + fenced(code), cells)
    assert edits.changes == {"search": code[: code.index("\n\n\nassert")]}
    assert edits.touched_readonly == ()


# --------------------------------------------------------------------------- blocks and prose


def test_the_last_of_several_blocks_for_a_cell_wins_and_bash_blocks_are_ignored():
    cells = search_cells()
    first = SEARCH.replace("while lo < hi:", "while lo < hi + 1:")
    reply = (
        "The loop ends one step early. A first idea:\n\n"
        f"{fenced(first)}\n\nCleaner:\n\n{fenced(SEARCH_FIXED)}\n\n"
        "You can check it from a terminal too:\n\n"
        f"{fenced('python -m doctest search.py', 'bash')}\n\n"
        f"{fenced('All tests passed.', 'output')}"
    )
    edits = split_reply(reply, cells)
    assert edits.changes == {"search": SEARCH_FIXED}
    assert "python -m doctest" not in edits.explanation and "A first idea" in edits.explanation


def test_untagged_blocks_count_only_without_a_python_block():
    cells = search_cells()
    untagged = "The loop needs `<=`:\n\n" + fenced(SEARCH_FIXED, "") + "\n\n" + fenced("pytest -q", "bash")
    assert split_reply(untagged, cells).changes == {"search": SEARCH_FIXED}
    both = "Fix:\n\n" + fenced(SEARCH_FIXED) + "\n\nOr, older:\n\n" + fenced(SEARCH, "")
    assert split_reply(both, cells).changes == {"search": SEARCH_FIXED}


def test_only_whitespace_changes_are_no_change():
    cells = [cell("c1", "x = 1\nprint(x)", "failing", 1)]
    edits = split_reply("Looks right to me:\n\n```python\n\nx = 1   \nprint(x)\n\n\n```", cells)
    assert edits.changes == {} and edits.reason == "the reply's code left every cell as it was"
    assert not edits.declined


def test_explanation_squeezes_blank_runs_and_is_capped():
    cells = search_cells()
    reply = "First.\n\n\n\n\nSecond.  \n\n" + fenced(SEARCH_FIXED) + "\n\n\n\nThird." + " word" * 600
    explanation = split_reply(reply, cells).explanation
    assert explanation.startswith("First.\n\nSecond.\n\nThird. word")
    assert len(explanation) == 2000


# --------------------------------------------------------------------------- no usable code


def test_a_refusal_changes_nothing():
    edits = split_reply("I'm sorry, but I can't help with that request.", search_cells())
    assert edits.changes == {} and edits.reason == "the reply contained no fenced code block"
    assert not edits.declined and edits.explanation.startswith("I'm sorry")


def test_a_decline_without_code_and_with_the_cell_unchanged():
    cells = [
        cell("plot", "ax = df.plot(x='day', y='sales')\nax.set_title('Sales')", "failing", 5),
        cell("load", "df = pd.read_csv('sales.csv')", "moved", 3),
    ]
    prose = (
        "`df` is not defined in the kernel: the cell that loads it comes later in the notebook. "
        "Nothing in this cell is wrong; this needs In [3] to run first."
    )
    declined = split_reply(prose, cells)
    assert declined.declined and declined.changes == {}
    assert declined.reason == "the reply contained no fenced code block"
    unchanged = split_reply(prose + "\n\n" + fenced(cells[0].source), cells)
    assert unchanged.declined and unchanged.changes == {}
    assert split_reply("I can't tell which column you meant to plot.", cells).declined


def test_an_unterminated_block_and_an_empty_block():
    cut = split_reply("The loop stops early. Here is the fix:\n\n```python\ndef search(arr, x):\n    lo", [])
    assert cut.changes == {} and cut.reason == "the reply's code block was cut off before its closing ```"
    assert cut.explanation == "The loop stops early. Here is the fix:"
    empty = split_reply("Fixed:\n\n```python\n\n```", search_cells())
    assert empty.changes == {} and empty.reason == "the reply's code block was empty"
