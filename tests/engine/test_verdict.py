"""The verdict on a fix: mechanical (verified by running) or computes (pinned by a check, or unchecked).

Realistic notebook cells as text; nothing runs, so pandas and numpy need not be installed.
"""

from __future__ import annotations

import pytest

from nbrefine.engine.verdict import Verdict, judge

# --------------------------------------------------------------------------- guessed intent


def test_an_index_changed_to_make_the_error_go_away_is_unchecked():
    original = 'message = "Hello, notebook!"\nlast = message[17]\nprint(last)\n'
    candidate = 'message = "Hello, notebook!"\nlast = message[16]\nprint(last)\n'
    verdict = judge(original, candidate)
    assert verdict == Verdict("computes", False, "the index 17 → 16 (line 2)")
    assert verdict.unchecked


def test_len_minus_one_is_a_guess_of_the_index():
    original = "A = [3, 1, 4, 1, 5]\nlast = A[len(A)]\n"
    candidate = "A = [3, 1, 4, 1, 5]\nlast = A[len(A) - 1]\n"
    verdict = judge(original, candidate)
    assert verdict.kind == "computes" and verdict.unchecked
    assert verdict.what == "the index len(A) → len(A) - 1 (line 2)"


def test_the_same_index_change_with_a_check_is_pinned():
    original = 'message = "Hello, notebook!"\nlast = message[17]\n'
    candidate = 'message = "Hello, notebook!"\nlast = message[16]\n'
    verdict = judge(original, candidate, checks=['assert last == "!"'])
    assert verdict.kind == "computes" and verdict.pinned and not verdict.unchecked


def test_a_check_of_testing_helpers_pins_too():
    original = "A = [3, 1, 4]\nlast = A[len(A)]\n"
    candidate = "A = [3, 1, 4]\nlast = A[len(A) - 1]\n"
    verdict = judge(original, candidate, checks=["np.testing.assert_allclose(last, 4)"])
    assert verdict.pinned


def test_a_check_without_an_assert_pins_nothing():
    original = "A = [3, 1, 4]\nlast = A[len(A)]\n"
    candidate = "A = [3, 1, 4]\nlast = A[len(A) - 1]\n"
    assert judge(original, candidate, checks=["print(last)", ""]).unchecked


def test_a_fix_of_a_failed_assert_is_pinned_by_that_assert():
    original = "ratings = [4, 5, 3]\navg = sum(ratings) / 2\nassert avg == 4\n"
    candidate = "ratings = [4, 5, 3]\navg = sum(ratings) / len(ratings)\nassert avg == 4\n"
    verdict = judge(original, candidate, failed_assert=True)
    assert verdict.kind == "computes" and verdict.pinned
    assert verdict.what == "the expression 2 → len(ratings) (line 2)"


def test_an_assert_kept_from_the_original_pins_what_it_reads():
    original = "prices = df['price']\ntotal = prices.sum() * 1.2\nassert total > 0\n"
    candidate = "prices = df['price']\ntotal = prices.sum() * 1.21\nassert total > 0\n"
    verdict = judge(original, candidate)
    assert verdict.kind == "computes" and verdict.pinned


def test_an_assert_above_the_change_pins_nothing():
    original = "assert len(df) > 0\nshare = df['sales'] / df['sales'].sum()\n"
    candidate = "assert len(df) > 0\nshare = df['sales'] / df['sales'].max()\n"
    assert judge(original, candidate, known_names={"df", "sales"}).unchecked


def test_an_assert_the_candidate_added_pins_nothing():
    original = "rate = hits / n\nprint(f'{rate:.1%}')\n"
    candidate = "rate = hits / n * 100\nassert rate <= 100\nprint(f'{rate:.1%}')\n"
    verdict = judge(original, candidate)
    assert verdict.kind == "computes" and verdict.unchecked
    assert verdict.what == "the expression hits / n → hits / n * 100 (line 1)"


# --------------------------------------------------------------------------- what a cell computes


def test_dropping_a_times_100_is_a_change_of_the_result():
    original = "pct = df['clicks'] / df['views'] * 100\npct.plot()\n"
    candidate = "pct = df['clicks'] / df['views']\npct.plot()\n"
    verdict = judge(original, candidate)
    assert verdict.unchecked
    assert verdict.what == (
        "the expression df['clicks'] / df['views'] * 100 → df['clicks'] / df['views'] (line 1)"
    )


def test_an_operator_changed_is_named():
    original = "x = 2\ny = 3\nz = x + y\n"
    candidate = "x = 2\ny = 3\nz = x - y\n"
    assert judge(original, candidate).what == "the operator + → - (line 3)"


def test_a_comparison_changed_is_named():
    original = "adults = df[df['age'] > 18]\n"
    candidate = "adults = df[df['age'] >= 18]\n"
    assert judge(original, candidate).what == "the index df['age'] > 18 → df['age'] >= 18 (line 1)"


def test_a_constant_in_a_function_body_computes():
    original = "def discounted(price):\n    rate = 0.5\n    return price * rate\n\nprint(discounted(80))\n"
    candidate = "def discounted(price):\n    rate = 0.25\n    return price * rate\n\nprint(discounted(80))\n"
    verdict = judge(original, candidate)
    assert verdict == Verdict("computes", False, "the literal 0.5 → 0.25 (line 2)")


def test_range_n_plus_one_computes():
    original = "squares = [i * i for i in range(n)]\n"
    candidate = "squares = [i * i for i in range(n + 1)]\n"
    assert judge(original, candidate).what == "the argument n → n + 1 (line 1)"


def test_a_keyword_argument_value_computes():
    original = "df['score'].hist(bins=10)\n"
    candidate = "df['score'].hist(bins=20)\n"
    assert judge(original, candidate).what == "the argument bins=10 → bins=20 (line 1)"


def test_a_slice_bound_computes():
    original = "top = ranked[1:10]\n"
    candidate = "top = ranked[0:10]\n"
    assert judge(original, candidate).what == "the slice 1:10 → 0:10 (line 1)"


def test_a_new_statement_that_computes():
    original = "total = sum(values)\nprint(total)\n"
    candidate = "total = sum(values)\ntotal = total / 100\nprint(total)\n"
    assert judge(original, candidate).what == "the new statement total = total / 100 (line 2)"


def test_only_the_first_two_changes_are_named():
    original = "a = x[1]\nb = y + 2\nc = z * 3\n"
    candidate = "a = x[2]\nb = y - 2\nc = z * 4\n"
    assert judge(original, candidate).what == (
        "the index 1 → 2 (line 1), the operator + → - (line 2) and 1 more"
    )


def test_choosing_another_existing_column_computes():
    original = 'df["Price"].mean()\n'
    candidate = 'df["price"].mean()\n'
    assert judge(original, candidate, known_names={"Price", "price"}).kind == "computes"


@pytest.mark.parametrize(
    ("original", "candidate"),
    [
        ("best = df['score'].idxmax()\n", "best = df['score'].idxmin()\n"),
        ("name = name.lstrip()\n", "name = name.rstrip()\n"),
        ("middle = df['age'].mean()\n", "middle = df['age'].median()\n"),
        ("model.fit(x_train)\n", "model.fit(y_train)\n"),
        ("sales = sales_2020.sum()\n", "sales = sales_2021.sum()\n"),
    ],
)
def test_close_spellings_of_different_things_compute(original: str, candidate: str):
    assert judge(original, candidate).kind == "computes"


# --------------------------------------------------------------------------- mechanical fixes


def test_a_misspelt_variable_is_mechanical():
    original = "revenue = 1200\nprofit = revenu - 300\n"
    candidate = "revenue = 1200\nprofit = revenue - 300\n"
    assert judge(original, candidate, known_names={"revenue"}) == Verdict("mechanical", False, "")


def test_a_misspelt_column_string_is_mechanical_when_the_column_exists():
    original = 'avg = df["Price"].mean()\n'
    candidate = 'avg = df["price"].mean()\n'
    assert judge(original, candidate, known_names={"df", "price", "qty"}).kind == "mechanical"
    assert judge(original, candidate).kind == "computes"  # not known to exist: a guess


def test_a_missing_colon_is_a_syntax_repair():
    original = "for row in rows\n    print(row)\n"
    candidate = "for row in rows:\n    print(row)\n"
    assert judge(original, candidate) == Verdict("mechanical", False, "")


def test_a_syntax_repair_that_also_changes_a_literal_computes():
    original = "for row in rows[1:]\n    print(row)\n"
    candidate = "for row in rows[0:]:\n    print(row)\n"
    verdict = judge(original, candidate)
    assert verdict.kind == "computes" and verdict.what == "the literal 1 → 0 (line 1)"


@pytest.mark.parametrize(
    ("original", "candidate"),
    [
        ("print(df.head(3)\n", "print(df.head(3))\n"),
        ('title = "Sales by region\nprint(title)\n', 'title = "Sales by region"\nprint(title)\n'),
        ("def area(r):\nreturn 3.14159 * r ** 2\n", "def area(r):\n    return 3.14159 * r ** 2\n"),
        ("if total = 0:\n    print('empty')\n", "if total == 0:\n    print('empty')\n"),
        ('print "done"\n', 'print("done")\n'),
        ("imoprt pandas as pd\n", "import pandas as pd\n"),
    ],
)
def test_syntax_repairs_are_mechanical(original: str, candidate: str):
    assert judge(original, candidate).kind == "mechanical"


def test_a_bracket_that_regroups_an_expression_computes():
    original = "total = (price + tax * qty\n"
    candidate = "total = (price + tax) * qty\n"
    assert judge(original, candidate).kind == "computes"


def test_an_added_import_is_mechanical():
    original = "arr = np.array([1, 2, 3])\nprint(arr.mean())\n"
    candidate = "import numpy as np\n\narr = np.array([1, 2, 3])\nprint(arr.mean())\n"
    assert judge(original, candidate) == Verdict("mechanical", False, "")


def test_a_fixed_import_is_mechanical():
    original = "import matplotlib.pyplot as pl\nplt.plot(xs, ys)\n"
    candidate = "import matplotlib.pyplot as plt\nplt.plot(xs, ys)\n"
    assert judge(original, candidate).kind == "mechanical"


def test_a_miscased_method_is_mechanical():
    original = "by_region = df.groupBy('region')['sales'].sum()\n"
    candidate = "by_region = df.groupby('region')['sales'].sum()\n"
    assert judge(original, candidate).kind == "mechanical"


def test_an_attribute_renamed_to_a_known_one_is_mechanical():
    original = "cols = list(df.colums)\n"
    candidate = "cols = list(df.columns)\n"
    assert judge(original, candidate, known_names={"df", "columns", "index"}).kind == "mechanical"


def test_a_misspelt_keyword_argument_is_mechanical():
    original = "df = pd.read_csv('sales.csv', seperator=';')\n"
    candidate = "df = pd.read_csv('sales.csv', separator=';')\n"
    assert judge(original, candidate).kind == "mechanical"


@pytest.mark.parametrize(
    ("original", "candidate"),
    [
        # a missing self.
        (
            "class Account:\n    def __init__(self, balance):\n        self.balance = balance\n"
            "    def report(self):\n        return f'{balance:.2f}'\n",
            "class Account:\n    def __init__(self, balance):\n        self.balance = balance\n"
            "    def report(self):\n        return f'{self.balance:.2f}'\n",
        ),
        # a method referenced, not called
        ("summary = df.describe\nprint(summary.T)\n", "summary = df.describe()\nprint(summary.T)\n"),
        # a type converted at a call (TypeError: can only concatenate str)
        ("label = 'n = ' + count\n", "label = 'n = ' + str(count)\n"),
        ("n = int(total) // size\n", "n = int(total) // int(size)\n"),
        # .copy() against SettingWithCopyWarning
        ("recent = df[df['year'] > 2020]\n", "recent = df[df['year'] > 2020].copy()\n"),
        # deprecated APIs replaced by their successors
        ("df = df.append(row, ignore_index=True)\n", "df = pd.concat([df, row], ignore_index=True)\n"),
        (
            "df = df.append(row, ignore_index=True)\n",
            "df = pd.concat([df, pd.DataFrame([row])], ignore_index=True)\n",
        ),
        ("x = arr.astype(np.float)\n", "x = arr.astype(float)\n"),
        ("x = arr.astype(np.float)\n", "x = arr.astype(np.float64)\n"),
        ("label = 'total: ' + df['x'].sum()\n", "label = 'total: ' + str(df['x'].sum())\n"),
        ("recent = df.dropna()\n", "recent = df.dropna().copy()\n"),
        ("rows, cols = df.shape()\n", "rows, cols = df.shape\n"),
        ("x = df.Price.max()\n", "x = df['Price'].max()\n"),
        ("for k, v in df.iteritems():\n    print(k)\n", "for k, v in df.items():\n    print(k)\n"),
    ],
)
def test_mechanical_fixes_at_calls_and_attributes(original: str, candidate: str):
    verdict = judge(original, candidate)
    assert verdict.kind == "mechanical", verdict.what


def test_whitespace_and_comments_are_mechanical():
    original = "total=price*qty\nprint( total )\n"
    candidate = "# the order's value\ntotal = price * qty  # before tax\n\nprint(total)\n"
    assert judge(original, candidate) == Verdict("mechanical", False, "")


def test_an_unchanged_cell_is_pinned_by_its_checks_only():
    cell = "total = price * qty\n"
    assert judge(cell, cell) == Verdict("mechanical", False, "")
    assert judge(cell, cell, checks=["assert total == 12"]).pinned


def test_a_mechanical_fix_next_to_a_guess_still_computes():
    original = "import numpy as np\nvals = np.arange(10)\nlast = vals[10]\nprint(lenght(vals))\n"
    candidate = "import numpy as np\nvals = np.arange(10)\nlast = vals[9]\nprint(len(vals))\n"
    verdict = judge(original, candidate)
    assert verdict.kind == "computes" and verdict.what == "the index 10 → 9 (line 3)"


def test_swapped_arguments_compute():
    verdict = judge("ratio = np.divide(hits, total)\n", "ratio = np.divide(total, hits)\n")
    assert verdict.what == "the order of the arguments hits, total → total, hits (line 1)"


def test_a_numpy_function_is_not_a_builtin_of_the_same_name():
    assert judge("peak = np.max(grid)\n", "peak = max(grid)\n").kind == "computes"  # not an alias


def test_an_indentation_error_does_not_hide_a_later_change():
    original = "def f(x):\n    if x:\n        return 1\n   return 2\n\nlimit = 5\n"
    fixed = "def f(x):\n    if x:\n        return 1\n    return 2\n\nlimit = 5\n"
    assert judge(original, fixed).kind == "mechanical"
    verdict = judge(original, fixed.replace("limit = 5", "limit = 6"))
    assert verdict.what == "the literal 5 → 6 (line 6)"


def test_an_unterminated_triple_quoted_string_closed_is_mechanical():
    original = 'query = """SELECT *\nFROM sales\n'
    candidate = 'query = """SELECT *\nFROM sales"""\n'
    assert judge(original, candidate).kind == "mechanical"


def test_a_dropped_slice_colon_computes():
    original = "tail = xs[1:]\nprint(tail\n"
    candidate = "tail = xs[1]\nprint(tail)\n"
    assert judge(original, candidate).kind == "computes"


def test_an_assert_kept_across_a_syntax_repair_pins_the_change():
    original = "total = 0\nfor i in range(3)\n    total = total + i\nassert total == 6\n"
    candidate = "total = 0\nfor i in range(4):\n    total = total + i\nassert total == 6\n"
    verdict = judge(original, candidate)
    assert verdict.kind == "computes" and verdict.pinned


def test_an_in_place_change_is_pinned_by_an_assert_on_the_object():
    original = "rows = []\nrows.append(1)\nassert rows == [2]\n"
    candidate = "rows = []\nrows.append(2)\nassert rows == [2]\n"
    assert judge(original, candidate).pinned


def test_a_print_added_to_show_the_result_is_mechanical() -> None:
    from nbrefine.engine.verdict import judge

    assert (
        judge(
            "north = lookup(revenue, 'North')",
            "north = lookup(revenue, 'north')\nprint('north is', north)",
            known_names={"north", "south"},
        ).kind
        == "mechanical"
    )
    assert judge("x = 1", "x = 1\nprint(f(x))").kind == "computes"  # the argument computes something
