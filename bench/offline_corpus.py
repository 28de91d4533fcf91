"""Failing notebook cells for ``bench_offline.py``: what the offline quick fixes should fix or decline.

Each :class:`Case` has the state it needs (``setup``, run in a fresh namespace), the failing
``cell``, optional extra ``checks`` (run after the cell, as ``%%refine --check`` would), and
for a fixable case the ``expected`` fixed cell: the fix a careful person would make. A fix the
loop offers is *right* when it equals ``expected`` (compared with ``normalize_code``) or
behaves the same (same output and same resulting values); otherwise it is *wrong*.

``external_cases()`` adds buggy programs from QuixBugs and HumanEvalFix, read at run time
from the repository's ``corpora/`` (they are logic bugs: the offline tier must decline them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CASES", "Case", "external_cases"]


@dataclass(frozen=True)
class Case:
    id: str
    error: str  # the error type the cell fails with
    setup: str
    cell: str
    expected: str | None = None  # the intended fixed cell (None: the offline tier should decline)
    checks: tuple[str, ...] = ()
    note: str = ""

    @property
    def fixable(self) -> bool:
        return self.expected is not None


SALES = """
import pandas as pd
import numpy as np
sales = pd.DataFrame({
    "order_id": [1, 2, 3, 4, 5, 6],
    "region": ["north", "south", "east", "north", "west", "east"],
    "product": ["apple", "pear", "apple", "fig", "pear", "fig"],
    "units": [10, 4, 7, 3, 8, 5],
    "unit_price": [0.5, 0.8, 0.5, 2.0, 0.8, 2.0],
    "Order Date": pd.to_datetime(
        ["2024-01-03", "2024-01-05", "2024-02-01", "2024-02-11", "2024-03-02", "2024-03-09"]
    ),
})
"""

PEOPLE = """
import pandas as pd
people = pd.DataFrame({
    "Name": ["Ann", "Bob", "Cid"],
    "Age": [34, 29, 41],
    "City": ["Oslo", "Rome", "Oslo"],
    "salary_usd": [5200, 4100, 6100],
})
"""

SENSOR = """
import numpy as np
readings = np.array([0.2, 0.7, 0.4, 0.9, 0.55, 0.1])
threshold = 0.5
"""

TEXT = """
words = ["pear", "apple", "fig", "apple", "kiwi", "pear", "apple"]
text = "the quick brown fox jumps over the lazy dog"
"""

PARAMS = """
params = {"learning_rate": 0.05, "n_estimators": 200, "max_depth": 4}
"""

COUNTER = """
counter = 0
seen = set()
total = 0
"""

# --------------------------------------------------------------------------- fixable


def _c(id: str, error: str, setup: str, cell: str, expected: str, *checks: str, note: str = "") -> Case:
    return Case(id, error, setup, cell, expected, tuple(checks), note)


CASES: list[Case] = [
    # ---------------------------------------------------------------- NameError
    _c(
        "name-missing-numpy",
        "NameError",
        "",
        "arr = np.linspace(0, 1, 5)\nprint(arr.mean())",
        "import numpy as np\narr = np.linspace(0, 1, 5)\nprint(arr.mean())",
    ),
    _c(
        "name-missing-pandas",
        "NameError",
        "",
        "# build a frame\nframe = pd.DataFrame({'a': [1, 2]})\nframe['b'] = frame['a'] * 2",
        "# build a frame\nimport pandas as pd\n"
        "frame = pd.DataFrame({'a': [1, 2]})\nframe['b'] = frame['a'] * 2",
    ),
    _c(
        "name-typo-cell-variable",
        "NameError",
        SALES,
        "total_units = sales['units'].sum()\nprint(totl_units)",
        "total_units = sales['units'].sum()\nprint(total_units)",
    ),
    _c("name-case", "NameError", SALES, "print(Sales.shape)", "print(sales.shape)"),
    _c(
        "name-counter-import",
        "NameError",
        TEXT,
        "counts = Counter(words)\nprint(counts.most_common(2))",
        "from collections import Counter\ncounts = Counter(words)\nprint(counts.most_common(2))",
    ),
    _c(
        "name-defaultdict-import",
        "NameError",
        TEXT,
        "groups = defaultdict(list)\nfor w in words:\n    groups[w[0]].append(w)",
        "from collections import defaultdict\n"
        "groups = defaultdict(list)\nfor w in words:\n    groups[w[0]].append(w)",
    ),
    _c(
        "name-json-stdlib",
        "NameError",
        PARAMS,
        "payload = json.dumps(params, indent=2)\nprint(payload)",
        "import json\npayload = json.dumps(params, indent=2)\nprint(payload)",
    ),
    _c("name-math-stdlib", "NameError", "", "r = math.sqrt(16)", "import math\nr = math.sqrt(16)"),
    _c("name-builtin-typo", "NameError", TEXT, "pritn(len(words))", "print(len(words))"),
    _c(
        "name-path-import",
        "NameError",
        "",
        "p = Path('data') / 'file.csv'\nprint(p.suffix)",
        "from pathlib import Path\np = Path('data') / 'file.csv'\nprint(p.suffix)",
    ),
    _c(
        "name-typo-in-function",
        "NameError",
        "",
        "def norm(xs):\n    m = max(xs)\n    return [x / m for x in xz]\nprint(norm([1, 2, 4]))",
        "def norm(xs):\n    m = max(xs)\n    return [x / m for x in xs]\nprint(norm([1, 2, 4]))",
    ),
    _c(
        "name-lowercase-true",
        "NameError",
        "",
        "verbose = true\nif verbose:\n    print('ok')",
        "verbose = True\nif verbose:\n    print('ok')",
    ),
    _c(
        "name-re-stdlib",
        "NameError",
        "",
        "digits = re.findall(r'\\d+', 'a1b22')",
        "import re\ndigits = re.findall(r'\\d+', 'a1b22')",
    ),
    _c(
        "name-unqualified-pandas",
        "NameError",
        "import pandas as pd",
        "frame = DataFrame({'x': [1, 2]})",
        "frame = pd.DataFrame({'x': [1, 2]})",
    ),
    _c(
        "name-datetime-import",
        "NameError",
        "",
        "d = datetime(2024, 1, 31)\nprint(d.month)",
        "from datetime import datetime\nd = datetime(2024, 1, 31)\nprint(d.month)",
    ),
    _c(
        "name-typo-global",
        "NameError",
        SENSOR,
        "above = readings[readings > threshhold]\nprint(len(above))",
        "above = readings[readings > threshold]\nprint(len(above))",
    ),
    _c(
        "name-typo-in-comprehension",
        "NameError",
        TEXT,
        "lengths = {w: len(w) for w in wrods}",
        "lengths = {w: len(w) for w in words}",
    ),
    # ---------------------------------------------------------------- AttributeError
    _c(
        "attr-groupby-case",
        "AttributeError",
        SALES,
        "by_region = sales.groupBy('region')['units'].sum()",
        "by_region = sales.groupby('region')['units'].sum()",
        "assert by_region['north'] == 13",
    ),
    _c("attr-numpy-arange", "AttributeError", SALES, "idx = np.arrange(10)", "idx = np.arange(10)"),
    _c(
        "attr-column-case",
        "AttributeError",
        SALES,
        "n = sales.Units.sum()",
        "n = sales.units.sum()",
        "assert n == 37",
    ),
    _c(
        "attr-column-with-space",
        "AttributeError",
        SALES,
        "first = sales.order_date.min()",
        'first = sales["Order Date"].min()',
    ),
    _c(
        "attr-sort-values",
        "AttributeError",
        SALES,
        "ranked = sales.sort_value('units', ascending=False)",
        "ranked = sales.sort_values('units', ascending=False)",
    ),
    _c("attr-str-method-case", "AttributeError", "", "name = 'alice'.Upper()", "name = 'alice'.upper()"),
    _c("attr-list-push", "AttributeError", TEXT, "words.push('plum')", "words.append('plum')"),
    _c(
        "attr-ndarray-method",
        "AttributeError",
        SENSOR,
        "col = readings.reshpe(-1, 1)",
        "col = readings.reshape(-1, 1)",
    ),
    _c(
        "attr-series-apply",
        "AttributeError",
        SALES,
        "doubled = sales['units'].aplly(lambda u: u * 2)",
        "doubled = sales['units'].apply(lambda u: u * 2)",
    ),
    _c(
        "attr-str-accessor",
        "AttributeError",
        SALES,
        "upper = sales.region.str.uper()",
        "upper = sales.region.str.upper()",
    ),
    _c(
        "attr-pandas-function-case",
        "AttributeError",
        SALES,
        "dates = pd.to_DateTime(['2024-01-01', '2024-02-01'])",
        "dates = pd.to_datetime(['2024-01-01', '2024-02-01'])",
    ),
    _c(
        "attr-math-floor",
        "AttributeError",
        "import math",
        "low = math.flor(2.5)",
        "low = math.floor(2.5)",
    ),
    _c(
        "attr-people-column",
        "AttributeError",
        PEOPLE,
        "mean_age = people.age.mean()",
        "mean_age = people.Age.mean()",
    ),
    _c(
        "attr-os-path-typo",
        "AttributeError",
        "import os",
        "print(os.path.joinn('data', 'x.csv'))",
        "print(os.path.join('data', 'x.csv'))",
    ),
    # ---------------------------------------------------------------- KeyError
    _c(
        "key-column-case",
        "KeyError",
        SALES,
        "total = sales['Units'].sum()",
        "total = sales['units'].sum()",
        "assert total == 37",
    ),
    _c(
        "key-column-list",
        "KeyError",
        SALES,
        "view = sales[['region', 'Product']]",
        "view = sales[['region', 'product']]",
    ),
    _c(
        "key-groupby",
        "KeyError",
        SALES,
        'by_region = sales.groupby("Region")["units"].sum()',
        'by_region = sales.groupby("region")["units"].sum()',
    ),
    _c(
        "key-space-vs-underscore",
        "KeyError",
        SALES,
        "avg_price = sales.groupby('region')['unit price'].mean()",
        "avg_price = sales.groupby('region')['unit_price'].mean()",
    ),
    _c(
        "key-sort-transposition",
        "KeyError",
        SALES,
        "ranked = sales.sort_values('untis')",
        "ranked = sales.sort_values('units')",
    ),
    _c(
        "key-dict",
        "KeyError",
        PARAMS,
        "lr = params['learning_rte']\nprint(lr * 2)",
        "lr = params['learning_rate']\nprint(lr * 2)",
    ),
    _c(
        "key-loc-column",
        "KeyError",
        SALES,
        "big = sales.loc[sales['units'] > 5, 'Product']",
        "big = sales.loc[sales['units'] > 5, 'product']",
    ),
    _c(
        "key-pivot-table",
        "KeyError",
        SALES,
        "pt = sales.pivot_table(index='region', values='Units', aggfunc='sum')",
        "pt = sales.pivot_table(index='region', values='units', aggfunc='sum')",
    ),
    _c(
        "key-list-in-variable",
        "KeyError",
        SALES,
        "cols = ['region', 'unit_prices']\nsubset = sales[cols]",
        "cols = ['region', 'unit_price']\nsubset = sales[cols]",
    ),
    _c(
        "key-column-made-in-cell",
        "KeyError",
        SALES,
        "sales['revenue'] = sales['units'] * sales['unit_price']\ntop = sales.sort_values('Revenue').tail(1)",
        "sales['revenue'] = sales['units'] * sales['unit_price']\ntop = sales.sort_values('revenue').tail(1)",
    ),
    _c(
        "key-drop-columns",
        "KeyError",
        SALES,
        "slim = sales.drop(columns=['order id'])",
        "slim = sales.drop(columns=['order_id'])",
    ),
    _c(
        "key-dropna-subset",
        "KeyError",
        SALES,
        "clean = sales.dropna(subset=['Region'])",
        "clean = sales.dropna(subset=['region'])",
    ),
    _c(
        "key-agg-dict",
        "KeyError",
        SALES,
        "agg = sales.groupby('region').agg({'Units': 'sum'})",
        "agg = sales.groupby('region').agg({'units': 'sum'})",
    ),
    _c(
        "key-people-salary",
        "KeyError",
        PEOPLE,
        'top = people.nlargest(2, "salary")',
        'top = people.nlargest(2, "salary_usd")',
    ),
    _c(
        "key-nested-dict",
        "KeyError",
        "data = {'train': {'label': [1, 0]}, 'test': {'label': [0]}}",
        "y = data['train']['labels']",
        "y = data['train']['label']",
    ),
    # ---------------------------------------------------------------- ModuleNotFoundError / ImportError
    _c(
        "module-pandas-typo",
        "ModuleNotFoundError",
        "",
        "import pandsa as pd\nframe = pd.DataFrame({'a': [1]})",
        "import pandas as pd\nframe = pd.DataFrame({'a': [1]})",
    ),
    _c(
        "module-numpy-typo",
        "ModuleNotFoundError",
        "",
        "import numpi as np\nprint(np.pi)",
        "import numpy as np\nprint(np.pi)",
    ),
    _c(
        "module-collections-typo",
        "ModuleNotFoundError",
        TEXT,
        "from collection import Counter\nprint(Counter(words)['apple'])",
        "from collections import Counter\nprint(Counter(words)['apple'])",
    ),
    _c(
        "module-submodule-typo",
        "ModuleNotFoundError",
        "",
        "from numpy.linalgg import norm\nprint(norm([3, 4]))",
        "from numpy.linalg import norm\nprint(norm([3, 4]))",
    ),
    _c(
        "module-case",
        "ModuleNotFoundError",
        "",
        "import Numpy as np\nprint(np.zeros(2))",
        "import numpy as np\nprint(np.zeros(2))",
    ),
    _c(
        "module-no-alias-renames-uses",
        "ModuleNotFoundError",
        "",
        "import statistic\nprint(statistic.mean([1, 2, 3]))",
        "import statistics\nprint(statistics.mean([1, 2, 3]))",
    ),
    _c(
        "import-name-case",
        "ImportError",
        TEXT,
        "from collections import defaultDict\nd = defaultDict(int)",
        "from collections import defaultdict\nd = defaultdict(int)",
    ),
    # ---------------------------------------------------------------- UnboundLocalError
    _c(
        "unbound-global-counter",
        "UnboundLocalError",
        COUNTER,
        "def tick():\n    counter += 1\n    return counter\ntick()",
        "def tick():\n    global counter\n    counter += 1\n    return counter\ntick()",
    ),
    _c(
        "unbound-global-after-docstring",
        "UnboundLocalError",
        COUNTER,
        'def add(x):\n    """Add x to the running total."""\n    total = total + x\n    return total\nadd(3)',
        'def add(x):\n    """Add x to the running total."""\n    global total\n    total = total + x\n'
        "    return total\nadd(3)",
    ),
    _c(
        "unbound-nonlocal",
        "UnboundLocalError",
        "",
        "def make_acc():\n    total = 0\n    def add(x):\n        total += x\n        return total\n"
        "    return add\nacc = make_acc()\nprint(acc(5))",
        "def make_acc():\n    total = 0\n    def add(x):\n        nonlocal total\n        total += x\n"
        "        return total\n    return add\nacc = make_acc()\nprint(acc(5))",
    ),
    _c(
        "unbound-global-set",
        "UnboundLocalError",
        COUNTER,
        "def mark(x):\n    seen = seen | {x}\nmark(3)",
        "def mark(x):\n    global seen\n    seen = seen | {x}\nmark(3)",
    ),
    # ---------------------------------------------------------------- TypeError
    _c(
        "type-concat-call",
        "TypeError",
        SALES,
        "print('Total units: ' + sales['units'].sum())",
        "print('Total units: ' + str(sales['units'].sum()))",
    ),
    _c(
        "type-concat-variable",
        "TypeError",
        TEXT,
        "n = len(words)\nmsg = 'We have ' + n + ' words'",
        "n = len(words)\nmsg = 'We have ' + str(n) + ' words'",
    ),
    _c(
        "type-int-plus-str",
        "TypeError",
        "count_str = '12'",
        "total = 5 + count_str",
        "total = 5 + int(count_str)",
        "assert total == 17",
    ),
    _c(
        "type-compare-str-int",
        "TypeError",
        TEXT + "limit = '3'",
        "if len(words) > limit:\n    print(sorted(words)[:3])",
        "if len(words) > int(limit):\n    print(sorted(words)[:3])",
    ),
    _c(
        "type-range-str",
        "TypeError",
        "limit = '3'",
        "for i in range(limit):\n    print(i)",
        "for i in range(int(limit)):\n    print(i)",
    ),
    _c(
        "type-float-str",
        "TypeError",
        "price = '2.5'",
        "change = 3 - price",
        "change = 3 - float(price)",
        "assert change == 0.5",
    ),
    _c(
        "type-concat-numpy",
        "TypeError",
        PEOPLE,
        "print('Oldest: ' + people.Age.max())",
        "print('Oldest: ' + str(people.Age.max()))",
    ),
    _c(
        "type-augmented-concat",
        "TypeError",
        SALES,
        "report = 'rows: '\nreport += len(sales)",
        "report = 'rows: '\nreport += str(len(sales))",
    ),
    _c(
        "type-str-times-float",
        "TypeError",
        "rate = '0.2'",
        "tax = rate * 100.0",
        "tax = float(rate) * 100.0",
        "assert tax == 20.0",
    ),
    # ---------------------------------------------------------------- SyntaxError
    _c(
        "syntax-colon-for",
        "SyntaxError",
        TEXT,
        "for w in words  # each word\n    print(w)",
        "for w in words:  # each word\n    print(w)",
    ),
    _c(
        "syntax-colon-def",
        "SyntaxError",
        "",
        "def area(r)\n    return 3.14 * r ** 2\nprint(area(2))",
        "def area(r):\n    return 3.14 * r ** 2\nprint(area(2))",
    ),
    _c(
        "syntax-never-closed",
        "SyntaxError",
        SALES,
        "print(sales.head()\nprint(len(sales))",
        "print(sales.head())\nprint(len(sales))",
    ),
    _c("syntax-unmatched", "SyntaxError", "", "total = (1 + 2))", "total = (1 + 2)"),
    _c(
        "syntax-print-statement",
        "SyntaxError",
        SALES,
        "print 'rows:', len(sales)",
        "print('rows:', len(sales))",
    ),
    _c(
        "syntax-assign-in-if",
        "SyntaxError",
        TEXT,
        "if len(words) = 7:\n    print('seven')",
        "if len(words) == 7:\n    print('seven')",
    ),
    _c("syntax-missing-comma", "SyntaxError", "", "nums = [1, 2 3, 4]", "nums = [1, 2, 3, 4]"),
    _c(
        "syntax-unterminated-string",
        "SyntaxError",
        "",
        "title = 'Sales report\nprint(title)",
        "title = 'Sales report'\nprint(title)",
    ),
    _c("syntax-mismatched-bracket", "SyntaxError", "", "vals = [1, 2, 3)", "vals = [1, 2, 3]"),
    _c(
        "syntax-else-if",
        "SyntaxError",
        "x = 5",
        "if x > 10:\n    size = 'big'\nelse if x > 3:\n    size = 'mid'",
        "if x > 10:\n    size = 'big'\nelif x > 3:\n    size = 'mid'",
    ),
    _c(
        "syntax-multiline-never-closed",
        "SyntaxError",
        SALES,
        "result = sales.groupby('region').agg(\n    units=('units', 'sum')\nprint(result)",
        "result = sales.groupby('region').agg(\n    units=('units', 'sum'))\nprint(result)",
    ),
    _c(
        "syntax-dict-missing-comma",
        "SyntaxError",
        "",
        "cfg = {'a': 1 'b': 2}\nprint(cfg)",
        "cfg = {'a': 1, 'b': 2}\nprint(cfg)",
    ),
    # ---------------------------------------------------------------- IndentationError / TabError
    _c(
        "indent-expected-block",
        "IndentationError",
        TEXT,
        "for w in words:\nprint(w)",
        "for w in words:\n    print(w)",
    ),
    _c(
        "indent-unexpected",
        "IndentationError",
        "",
        "x = 1\n    y = 2\nprint(x + y)",
        "x = 1\ny = 2\nprint(x + y)",
    ),
    _c(
        "indent-unindent-mismatch",
        "IndentationError",
        "",
        "def f(x):\n    y = x * 2\n   return y\nprint(f(2))",
        "def f(x):\n    y = x * 2\n    return y\nprint(f(2))",
    ),
    _c(
        "indent-def-body",
        "IndentationError",
        "",
        "def double(x):\nreturn x * 2\nprint(double(3))",
        "def double(x):\n    return x * 2\nprint(double(3))",
    ),
    _c(
        "tab-mixed-8",
        "TabError",
        "",
        "if True:\n\tx = 1\n        y = 2\nprint(x + y)",
        "if True:\n        x = 1\n        y = 2\nprint(x + y)",
    ),
    _c(
        "tab-mixed-4",
        "TabError",
        "",
        "for i in range(2):\n    a = i\n\tb = i\nprint(a, b)",
        "for i in range(2):\n    a = i\n    b = i\nprint(a, b)",
    ),
    # ---------------------------------------------------------------- several errors in a row
    _c(
        "multi-name-then-key",
        "NameError",
        SALES,
        "summary = sale.groupby('Region')['units'].sum()\nprint(summary)",
        "summary = sales.groupby('region')['units'].sum()\nprint(summary)",
        "assert summary['north'] == 13",
    ),
    _c(
        "multi-import-then-attribute",
        "NameError",
        "",
        "grid = np.arange(6).reshap(2, 3)",
        "import numpy as np\ngrid = np.arange(6).reshape(2, 3)",
    ),
    _c(
        "multi-syntax-then-name",
        "SyntaxError",
        TEXT,
        "for w in wrods\n    print(w)",
        "for w in words:\n    print(w)",
    ),
    _c(
        "multi-key-then-type",
        "KeyError",
        SALES,
        "print('Units: ' + sales['Units'].sum())",
        "print('Units: ' + str(sales['units'].sum()))",
    ),
    _c(
        "multi-two-keys-one-line",
        "KeyError",
        SALES,
        "by = sales.groupby('Region')['Units'].sum()",
        "by = sales.groupby('region')['units'].sum()",
        "assert by['north'] == 13",
    ),
    _c(
        "multi-datetime-module",
        "NameError",
        "",
        "day = datetime.date(2024, 5, 1)\nprint(day.isoformat())",
        "import datetime\nday = datetime.date(2024, 5, 1)\nprint(day.isoformat())",
        note="`from datetime import datetime` is tried first and fails its trial",
    ),
    _c(
        "multi-first-candidate-fails",
        "NameError",
        "price = '0.05'\nprize = 0.05",
        "interest = 1000.0 * prise\nprint(interest)",
        "interest = 1000.0 * prize\nprint(interest)",
        "assert interest == 50.0",
        note="the closest name holds a str: its trial fails, the next candidate passes",
    ),
]

# --------------------------------------------------------------------------- to decline


def _d(id: str, error: str, setup: str, cell: str, *checks: str, note: str = "") -> Case:
    return Case(id, error, setup, cell, None, tuple(checks), note)


CASES += [
    _d(
        "decline-wrong-average",
        "AssertionError",
        SALES,
        "avg = sales['units'].sum() / (len(sales) + 1)\nassert avg == sales['units'].mean()",
    ),
    _d(
        "decline-zero-division",
        "ZeroDivisionError",
        SALES,
        "empty = sales[sales['units'] > 100]\nshare = len(empty) / len(empty)",
    ),
    _d("decline-value-error", "ValueError", "", "n = int('12a')"),
    _d("decline-index-error", "IndexError", TEXT, "tenth = words[10]"),
    _d("decline-none-subscript", "TypeError", TEXT, "ordered = words.sort()\nprint(ordered[0])"),
    _d("decline-none-attribute", "AttributeError", TEXT, "res = words.sort()\nres.reverse()"),
    _d("decline-unknown-name", "NameError", SALES, "print(model.score(sales))"),
    _d("decline-unknown-column", "KeyError", SALES, "w = sales['weight'].sum()"),
    _d(
        "decline-not-installed",
        "ModuleNotFoundError",
        "",
        "from sklearn.linear_model import LinearRegression\nmodel = LinearRegression()",
        note="a %pip install hint, no candidate",
    ),
    _d(
        "decline-local-elsewhere",
        "NameError",
        "def load():\n    result = [1, 2, 3]\n    return len(result)\n",
        "load()\nprint(result)",
    ),
    _d(
        "decline-unbound-conditional",
        "UnboundLocalError",
        "",
        "def pick(flag):\n    if flag:\n        choice = 'a'\n    return choice\npick(False)",
    ),
    _d("decline-none-operand", "TypeError", "", "x = 1 + None"),
    _d(
        "decline-file-not-found",
        "FileNotFoundError",
        "import pandas as pd",
        "frame = pd.read_csv('no_such_file.csv')",
    ),
    _d("decline-recursion", "RecursionError", "", "def fact(n):\n    return n * fact(n - 1)\nfact(5)"),
    _d(
        "decline-used-before-assignment",
        "NameError",
        SALES,
        "for u in sales['units']:\n    running += u\nrunning = 0",
    ),
    _d(
        "decline-off-by-one",
        "AssertionError",
        "",
        "def last(xs):\n    return xs[len(xs) - 2]\nassert last([1, 2, 3]) == 3",
    ),
]

#: Buggy programs drawn from the corpora in ``corpora/`` (names), read at run time.
EXTERNAL_QUIXBUGS = ("detect_cycle", "possible_change", "kth", "gcd", "get_factors", "levenshtein")
EXTERNAL_HUMANEVAL = ("Python/0", "Python/25", "Python/47", "Python/137", "Python/162", "Python/2")


def _data_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "corpora"


def external_cases(everything: bool = False) -> list[Case]:
    """QuixBugs and HumanEvalFix buggy programs as cells (all of them with ``everything``)."""
    cases: list[Case] = []
    data = _data_dir()
    # The corpora ship with the repository: a missing file is an error, not a smaller corpus.
    for line in (data / "quixbugs_python.jsonl").read_text().splitlines():
        row = json.loads(line)
        if everything or row["name"] in EXTERNAL_QUIXBUGS:
            cell = row["buggy_program"].rstrip() + "\n\n" + row["tests"]
            cases.append(Case(f"quixbugs:{row['name']}", "?", "", cell, None, note="QuixBugs"))
    for line in (data / "humanevalpack_python.jsonl").read_text().splitlines():
        row = json.loads(line)
        if everything or row["task_id"] in EXTERNAL_HUMANEVAL:
            cell = (
                row["prompt"] + row["buggy_solution"] + "\n" + row["test"] + f"\ncheck({row['entry_point']})"
            )
            cases.append(Case(f"humaneval:{row['task_id']}", "?", "", cell, None, note="HumanEvalFix"))
    return cases
