"""Build the cross-cell repair corpus: ``tests/corpus/crosscell/*.json``, one notebook case a file.

A failure often surfaces in one cell and is caused in another. Each case is a small notebook, the
replies a scripted model gives ``nbrefine fix`` for it, and what the fixed notebook must look like
(``tests/corpus/crosscell/README.md`` describes the format). Five kinds:

- ``checked``: an exercise (markdown), the function cell (a buggy program) and a cell of asserts.
  The asserts fail because the function is wrong, so the fix belongs in the function cell and the
  checks cell must stay byte-identical. Programs and asserts come from the repository's copies of
  QuixBugs and HumanEvalFix (``corpora/``).
- ``nbgrader``: the same as an nbgrader assignment (solution cell, locked graded tests cell).
- ``cascade``: a cell fails for a reason the model cannot fix (it declines), and a later cell fails
  only because the first one did: neither may be patched.
- ``below``: a cell uses a name that only a cell below it defines; the fix moves that cell above,
  and the reply (which, like a real model with no context, invents a definition) is not used.
- ``unchecked``: an index or literal edit in a cell that nothing checks: a proposal, not applied.

The replies of the first two kinds are written in the shapes real models answer in
(``REPLY_SHAPES``), with 2-3 sentences of prose about the actual bug of each program.

Which programs: those whose buggy version fails one of the chosen asserts quickly (no hang, no
endless recursion) and whose solution passes them all, and no QuixBugs graph program (their tests
need Node classes from other files). ``--screen`` prints how every program of both corpora
behaves; the chosen ones (``PICKS``) and every case are verified on every run, in a subprocess
with a 5 s limit per run of cells, and the script stops if one no longer qualifies, so its output
never depends on the machine.

Usage:
    python scripts/make_crosscell_corpus.py              # rewrite tests/corpus/crosscell/*.json
    python scripts/make_crosscell_corpus.py --out DIR    # write the cases into DIR instead
    python scripts/make_crosscell_corpus.py --screen     # how every corpus program behaves
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "corpus" / "crosscell"
QUIXBUGS = ROOT / "corpora" / "quixbugs_python.jsonl"
HUMANEVAL = ROOT / "corpora" / "humanevalpack_python.jsonl"
ARGS = ["--no-quick-fixes", "--max-attempts", "1"]
TIMEOUT_S = 5.0
MAX_ASSERTS = 4  # taken in order; the first failing one is appended if none of these fails
MAX_ASSERT_LEN = 120
LICENCE = "MIT, see corpora/LICENSE-octopack"
HANDWRITTEN = "handwritten for this corpus (scripts/make_crosscell_corpus.py), stdlib only"

#: The reply shapes of the checked and nbgrader cases (see /work/shared/data/model-replies.md):
REPLY_SHAPES = {
    # prose, then ONE block: the corrected function above the unchanged asserts of the checks
    # cell (asked to fix the checks cell, a real model redefines the function there)
    "function-above-checks": "a",
    # a `### In [1] (cell 'x')` heading per block, prose between
    "labelled-blocks": "b",
    # the whole defining cell alone in one unlabelled block
    "whole-cell": "c",
    # the block's first line is a comment label `# In [1] (cell 'x')`
    "comment-label": "d",
    # prose before and after the block (the block holds the whole defining cell)
    "prose-around": "e",
}


# --------------------------------------------------------------------------- the chosen programs


@dataclass(frozen=True)
class Pick:
    """One corpus program made into a case, with the reply a model gives for it."""

    corpus: str  # "quixbugs" | "humanevalfix"
    key: str  # the QuixBugs name or the HumanEvalFix task id
    kind: str  # "checked" | "nbgrader"
    shape: str  # a key of REPLY_SHAPES
    prose: str  # what the reply says before its code
    after: str = ""  # prose after the code (shape "prose-around")
    docstring: str = ""  # the reply turns the exercise text into this one-line docstring
    reply_head: str | None = None  # function-above-checks: the block's lines above the function
    checks_block: str = ""  # labelled-blocks: prose, then a labelled block of the unchanged checks


PICKS: tuple[Pick, ...] = (
    # ---- QuixBugs, checked
    Pick(
        "quixbugs",
        "sieve",
        "checked",
        "function-above-checks",
        "`any()` over an empty list is `False`, so 2 is never appended, `primes` stays empty and "
        "`sieve` returns `[]` for every input; `sieve(2) == [2]` is the first check to fail. A "
        "number is prime when *all* the primes found so far leave a remainder, so the condition "
        "needs `all(...)`, which is also `True` for the empty list. Here is the corrected function "
        "with your checks unchanged:",
    ),
    Pick(
        "quixbugs",
        "bucketsort",
        "checked",
        "labelled-blocks",
        "The second loop enumerates `arr` instead of `counts`, so it emits every input *position* "
        "repeated by the input *value* (for `[3, 11, 2, ...]`: three 0s, eleven 1s, ...) instead of "
        "every value repeated by its count. Iterating over `counts` fixes it; the checks stay as "
        "they are.",
    ),
    Pick(
        "quixbugs",
        "get_factors",
        "checked",
        "whole-cell",
        "When the trial-division loop finds no divisor, the remaining `n` is itself prime and is "
        "the last factor, but the function returns `[]` and drops it: `get_factors(100)` gives "
        "`[2, 2, 5]` and `get_factors(101)` gives `[]`. Returning `[n]` there fixes both.",
    ),
    Pick(
        "quixbugs",
        "max_sublist_sum",
        "checked",
        "comment-label",
        "This is Kadane's algorithm without its reset: `max_ending_here` carries a negative "
        "running sum into the next sublist, so `[4, -5, 2, 1, -1, 3]` gives 4 instead of 5 (the "
        "best sublist, `2, 1, -1, 3`, starts after the -5). Clamping the running sum at zero "
        "restores the algorithm.",
    ),
    Pick(
        "quixbugs",
        "pascal",
        "checked",
        "prose-around",
        "Row `r` of Pascal's triangle has `r + 1` entries, but `range(0, r)` builds only `r` of "
        "them, so the second row comes out as `[1]` and `pascal(2)` fails (for larger `n` the short "
        "rows then raise `IndexError`). The inner loop has to run to `r + 1`:",
        after="With that change the `c < r` guard supplies the 0 to the right of the previous row, "
        "so every row ends with a 1 as expected.",
    ),
    Pick(
        "quixbugs",
        "quicksort",
        "checked",
        "function-above-checks",
        "The two partitions use `x < pivot` and `x > pivot`, so every element equal to the pivot "
        "(other than the pivot itself) is dropped: the repeated 1s, 3s, 5s and 9s of the second "
        "check disappear. Putting the equal elements into one partition (`x >= pivot`) keeps "
        "them. I added a short docstring and left your checks as they were:",
        docstring="Return the elements of arr in sorted order.",
    ),
    Pick(
        "quixbugs",
        "rpn_eval",
        "checked",
        "labelled-blocks",
        "When an operator is read, the first value popped is the *right* operand, but "
        "`op(token, a, b)` passes it as the left one, so `3 5 + 2 /` computes `2 / 8 = 0.25` "
        "instead of `8 / 2 = 4.0`. Swapping the arguments to `op(token, b, a)` fixes subtraction "
        "and division (addition and multiplication were unaffected).",
        checks_block="The checks need no change:",
    ),
    Pick(
        "quixbugs",
        "to_base",
        "checked",
        "function-above-checks",
        "`num % b` yields the *least* significant digit first, but the loop appends each digit to "
        "the right of `result`, so the digits come out reversed: `to_base(31, 16)` returns `'F1'` "
        "instead of `'1F'`. Prepending each new digit fixes the order:",
        reply_head="import string\n\n\n",  # the model re-imports what the function uses
    ),
    Pick(
        "quixbugs",
        "kth",
        "checked",
        "comment-label",
        "When `k` falls in the `above` partition, the recursive call still passes the original `k`, "
        "but `above` is a shorter list whose first element has rank `num_lessoreq`; `k` ends up past "
        "the end and `arr[0]` raises `IndexError` on an empty list. The rank must be shifted: "
        "`kth(above, k - num_lessoreq)`.",
    ),
    # ---- HumanEvalFix, checked
    Pick(
        "humanevalfix",
        "Python/13",
        "checked",
        "prose-around",
        "The Euclidean loop is right, but it runs until `b` is 0 and then returns `b`, so the "
        "function always returns 0. The GCD is the value left in `a` when the loop stops:",
        after="`greatest_common_divisor(144, 60)` now goes (144, 60), (60, 24), (24, 12), (12, 0) "
        "and returns 12.",
    ),
    Pick(
        "humanevalfix",
        "Python/24",
        "checked",
        "whole-cell",
        "`n - i == 0` only holds when `i == n`, which `range(n)` never reaches, so the loop finds "
        'nothing and the function returns `None`. "Divides evenly" is a remainder test, '
        "`n % i == 0`; scanning downwards then returns the largest divisor first.",
    ),
    Pick(
        "humanevalfix",
        "Python/3",
        "checked",
        "whole-cell",
        "`balance == 0` fires when the balance comes back to exactly zero, not when it drops below "
        "it, so `[1, 2, -3, 1, 2, -3]` is reported as going negative and `[1, 2, -4, 5, 6]` is not. "
        "The comparison should be `balance < 0`:",
    ),
    Pick(
        "humanevalfix",
        "Python/60",
        "checked",
        "function-above-checks",
        "`range(n)` stops at `n - 1`, so the sum leaves out `n` itself: `sum_to_n(1)` is 0 and "
        "`sum_to_n(6)` is 15 instead of 21. The range has to include `n`, i.e. `range(n + 1)`. "
        "Here is the function with the fix, followed by your checks:",
    ),
    Pick(
        "humanevalfix",
        "Python/70",
        "checked",
        "labelled-blocks",
        "`switch` starts as `False`, so the first pick is `max(lst)` and the order is max, min, "
        "max, ...: `[1, 2, 3, 4]` gives `[4, 1, 3, 2]`. The docstring says strange sorting starts "
        "with the minimum, so `switch` must start as `True`.",
    ),
    Pick(
        "humanevalfix",
        "Python/98",
        "checked",
        "comment-label",
        "The loop visits the even indices and tests the right vowels, but adds 2 for every match, "
        "so `'aBCdEf'` counts its `E` twice and returns 2. Each uppercase vowel should add 1:",
    ),
    Pick(
        "humanevalfix",
        "Python/102",
        "checked",
        "prose-around",
        "When `y` is odd and the range holds more than one number, the biggest even number in "
        "`[x, y]` is `y - 1`, but the last line returns `x - 1`, which lies below the range (11 "
        "for `choose_num(12, 15)`). Returning `y - 1` gives 14:",
        after="The earlier branches already handle `x > y`, an even `y` and the single odd number "
        "`x == y`, so they stay as they were.",
    ),
    # ---- nbgrader assignments
    Pick(
        "quixbugs",
        "is_valid_parenthesization",
        "nbgrader",
        "labelled-blocks",
        "The loop rejects the string as soon as a `)` has no partner, but it never looks at what "
        "is left open at the end, so unclosed openings such as `'(('` are accepted. The string is "
        "balanced only if the depth is back to zero, so the last line should return `depth == 0`.",
        checks_block="The graded tests stay exactly as they are:",
    ),
    Pick(
        "quixbugs",
        "next_palindrome",
        "nbgrader",
        "whole-cell",
        "For an input of all 9s the function falls through to the last line, which builds 1, then "
        "`len(digit_list)` zeros, then 1: one digit too many, so `[9, 9, 9]` becomes "
        "`[1, 0, 0, 0, 1]` instead of `[1, 0, 0, 1]`. The palindrome after *n* nines has `n - 1` "
        "zeros between its two 1s.",
    ),
    Pick(
        "quixbugs",
        "hanoi",
        "nbgrader",
        "comment-label",
        "In the middle step the largest disk has to go straight from `start` to `end`, but the "
        "code records `(start, helper)`, so even `hanoi(1)` moves the disk to the wrong peg. "
        "Appending `(start, end)` fixes the sequence; I also gave the function a docstring from "
        "the exercise text.",
        docstring="Return the moves (a, b) that solve the Towers of Hanoi for `height` disks.",
    ),
    Pick(
        "humanevalfix",
        "Python/52",
        "nbgrader",
        "function-above-checks",
        "The two return values are inverted: the function returns `True` as soon as it meets a "
        "number at or above `t`, and `False` when every number is below it, the opposite of what "
        "the docstring asks. Swapping them fixes it; here it is above your tests:",
    ),
    Pick(
        "humanevalfix",
        "Python/131",
        "nbgrader",
        "prose-around",
        "`product*= product*int_digit` multiplies by the running product as well as by the digit, "
        "so the product squares itself at every odd digit: `digits(5014)` gives 25 instead of 5. "
        "It should multiply by the digit only:",
        after="`odd_count` still tells an all-even number apart, so `digits(120)` keeps returning 1 "
        "and an input with no odd digit returns 0.",
    ),
    Pick(
        "humanevalfix",
        "Python/8",
        "nbgrader",
        "labelled-blocks",
        "`prod_value` starts at 0, and anything multiplied by 0 stays 0, so the product is always "
        "0, even for the empty list, whose product should be 1. Starting the product at 1 (the "
        "empty product, as the docstring says) fixes every case:",
    ),
)


# --------------------------------------------------------------------------- the handwritten cases


def _md(cell_id: str, source: str) -> dict[str, Any]:
    return {"id": cell_id, "type": "markdown", "source": source, "metadata": {}}


def _code(cell_id: str, source: str) -> dict[str, Any]:
    return {"id": cell_id, "type": "code", "source": source, "metadata": {}}


def _py(code: str) -> str:
    return f"```python\n{code}\n```"


_SALES_TOTALS = (
    "totals = defaultdict(float)\n"
    "for row in rows:\n"
    '    totals[row["region"]] += float(row["amount"])\n'
    "dict(totals)"
)
_ALERTS = 'alerts = [r for r in readings if r > settings["threshold"]]\nprint(len(alerts), "alerts")'
_LOW_STOCK = "low = sorted(sku for sku, qty in stock.items() if qty < 5)\nlow"
_EXAM_STATS = (
    "import statistics\n\n"
    'print(f"mean {statistics.mean(scores.values()):.1f}, best {max(scores, key=scores.get)}")'
)

#: Cascades. Each has the failing cell, the cell that fails because of it (``then``), the errors
#: both raise in the original run, and two replies: a decline with no code (what a model says
#: when the fix needs the user), then a wrong patch of the dependent cell that is never asked
#: for with --max-attempts 1: a cell changed to it shows that the dependent cell was patched.
CASCADES: tuple[dict[str, Any], ...] = (
    {
        "name": "cascade-missing-csv",
        "cells": [
            _md("intro", "# Monthly sales\n\nLoad the shop's export and total the sales by region."),
            _code("imports", "import csv\nfrom collections import defaultdict"),
            _code(
                "load",
                'with open("sales_2023.csv", newline="") as f:\n'
                "    rows = list(csv.DictReader(f))\n"
                "len(rows)",
            ),
            _code("totals", _SALES_TOTALS),
        ],
        "failing": "load",
        "then": "totals",
        "errors": {"load": "FileNotFoundError", "totals": "NameError"},
        "replies": [
            "The cell opens `sales_2023.csv` in the notebook's folder and there is no such file "
            "there, hence the `FileNotFoundError`. I can't tell which file you meant to load or "
            "where the export lives, and making up sales rows would only hide the problem. Put the "
            "CSV next to the notebook (or change the path to where it is) and run this cell again "
            "before the cells below it.",
            "`rows` is not defined because the cell that reads the CSV failed. Until the file is "
            "there, start from an empty list so the totals can still be computed:\n\n"
            + _py("rows = []\n" + _SALES_TOTALS),
        ],
    },
    {
        "name": "cascade-env-threshold",
        "cells": [
            _code("readings", 'readings = [12.5, 48.0, 7.25, 61.0, 33.5]\nsettings = {"unit": "mm"}'),
            _code(
                "threshold",
                "import os\n\n"
                'settings["threshold"] = float(os.environ["ALERT_THRESHOLD_MM"])\n'
                'print("alert above", settings["threshold"], settings["unit"])',
            ),
            _code("alerts", _ALERTS),
        ],
        "failing": "threshold",
        "then": "alerts",
        "errors": {"threshold": "KeyError", "alerts": "KeyError"},
        "replies": [
            "The threshold is read from the environment variable `ALERT_THRESHOLD_MM`, which is not "
            "set in this kernel, hence the `KeyError`. Its value is your decision (the alert level "
            "for your gauges), so I won't guess one. Set it, for instance with "
            "`%env ALERT_THRESHOLD_MM=40` in a cell above, or export it before starting Jupyter, "
            "then run this cell again.",
            '`settings` has no `"threshold"` key because the cell above failed before adding it. '
            "A default keeps the alerts working:\n\n"
            + _py('settings.setdefault("threshold", 40.0)\n' + _ALERTS),
        ],
    },
    {
        "name": "cascade-sqlite-readonly",
        "cells": [
            _md("intro", "## Stock check\n\nList the products that need reordering."),
            _code(
                "connect",
                "import sqlite3\n\n"
                'conn = sqlite3.connect("file:inventory.db?mode=ro", uri=True)\n'
                'stock = dict(conn.execute("SELECT sku, qty FROM stock"))',
            ),
            _code("low", _LOW_STOCK),
        ],
        "failing": "connect",
        "then": "low",
        "errors": {"connect": "OperationalError", "low": "NameError"},
        "replies": [
            "`inventory.db` doesn't exist next to the notebook, and since the URI opens it read-only "
            "(`mode=ro`), SQLite won't create it and raises `OperationalError: unable to open "
            "database file`. I can't recreate your stock table, and an empty database would only "
            "make the next cell report nothing to reorder. Copy the database into this folder (or "
            "point the path at it) and re-run this cell.",
            "`stock` is undefined because the database could not be opened. Use an empty mapping so "
            "the cell runs:\n\n" + _py("stock = {}\n" + _LOW_STOCK),
        ],
    },
    {
        "name": "cascade-foreign-path",
        "cells": [
            _md("intro", "## Exam statistics"),
            _code(
                "load",
                "import json\nfrom pathlib import Path\n\n"
                'scores = json.loads(Path("/Users/maria/Downloads/scores.json").read_text())',
            ),
            _code("stats", _EXAM_STATS),
        ],
        "failing": "load",
        "then": "stats",
        "errors": {"load": "FileNotFoundError", "stats": "NameError"},
        "replies": [
            "The path `/Users/maria/Downloads/scores.json` points into a home folder on another "
            "computer, so this kernel cannot find the file. I don't know where the scores are on "
            "this machine and I won't invent them: copy `scores.json` next to the notebook and "
            'change the path to `Path("scores.json")`, or tell me where it is, then run this cell '
            "again.",
            "`scores` was never assigned because loading the file failed; here is the cell with a "
            "few sample scores so the statistics can be computed:\n\n"
            + _py('scores = {"ana": 71, "ben": 64, "chloe": 88}\n' + _EXAM_STATS),
        ],
    },
)

#: A name used in one cell and defined only in a cell below it. ``reply`` is what a model asked
#: to fix the failing cell alone writes: it invents a definition, which must not be used.
BELOW: tuple[dict[str, Any], ...] = (
    {
        "name": "below-rng-sample",
        "cells": [
            _md("intro", "## Dice simulation\n\nRoll a die ten times with a seeded generator."),
            _code("use-rng", "sample = [rng.randint(1, 6) for _ in range(10)]\nprint(sample)"),
            _code("rng-def", "import random\n\nrng = random.Random(42)"),
        ],
        "failing": "use-rng",
        "defining": "rng-def",
        "reply": "`rng` is not defined anywhere before this cell, so the list comprehension raises "
        "`NameError`. I create a seeded generator at the top of the cell, which keeps the sample "
        "reproducible:\n\n"
        + _py(
            "import random\n\nrng = random.Random(42)\n\n"
            "sample = [rng.randint(1, 6) for _ in range(10)]\nprint(sample)"
        ),
    },
    {
        "name": "below-config-dict",
        "cells": [
            _code("imports", "import json"),
            _code(
                "banner",
                "print(f\"experiment {CONFIG['name']}: {CONFIG['epochs']} epochs at lr={CONFIG['lr']}\")",
            ),
            _md("config-md", "### Configuration"),
            _code(
                "config",
                'CONFIG = {\n    "name": "baseline",\n    "epochs": 20,\n    "lr": 3e-4,\n}\n'
                "print(json.dumps(CONFIG))",
            ),
        ],
        "failing": "banner",
        "defining": "config",
        "reply": "`CONFIG` is used before it is defined, so the f-string raises `NameError`. I added a "
        "default configuration at the top of the cell:\n\n"
        + _py(
            'CONFIG = {"name": "default", "epochs": 10, "lr": 0.001}\n\n'
            "print(f\"experiment {CONFIG['name']}: {CONFIG['epochs']} epochs at lr={CONFIG['lr']}\")"
        ),
    },
    {
        "name": "below-helper-function",
        "cells": [
            _code(
                "clean",
                'names = ["  ada LOVELACE", "Grace hopper ", "alan turing"]\n'
                "cleaned = [normalize(n) for n in names]\ncleaned",
            ),
            _code("title", 'title = "notes on names"\nprint(title.title())'),
            _code(
                "normalize",
                "def normalize(name):\n"
                '    """Trim the name and capitalise each word."""\n'
                '    return " ".join(part.capitalize() for part in name.split())',
            ),
        ],
        "failing": "clean",
        "defining": "normalize",
        "reply": "`normalize` is called but never defined, so the cell stops with `NameError`. A small "
        "helper that trims and lower-cases the names does the job:\n\n"
        + _py(
            "def normalize(name):\n    return name.strip().lower()\n\n\n"
            'names = ["  ada LOVELACE", "Grace hopper ", "alan turing"]\n'
            "cleaned = [normalize(n) for n in names]\ncleaned"
        ),
    },
    {
        "name": "below-point-class",
        "cells": [
            _md("intro", "## Distances"),
            _code("points", "a = Point(0, 0)\nb = Point(3, 4)\nprint(a.distance(b))"),
            _code(
                "point-class",
                "import math\nfrom dataclasses import dataclass\n\n\n"
                "@dataclass\nclass Point:\n    x: float\n    y: float\n\n"
                "    def distance(self, other):\n"
                "        return math.hypot(self.x - other.x, self.y - other.y)",
            ),
        ],
        "failing": "points",
        "defining": "point-class",
        "reply": "`Point` isn't defined in the notebook yet, hence the `NameError`. A named tuple with a "
        "`distance` method is enough here:\n\n"
        + _py(
            "import math\nfrom typing import NamedTuple\n\n\n"
            "class Point(NamedTuple):\n    x: float\n    y: float\n\n"
            "    def distance(self, other):\n"
            "        return math.dist(self, other)\n\n\n"
            "a = Point(0, 0)\nb = Point(3, 4)\nprint(a.distance(b))"
        ),
    },
)

#: A literal, an index or an operator edited in a cell that no assert checks: the reply runs, but
#: nothing says it is what the user meant, so it is a proposal and the cell keeps its source.
UNCHECKED: tuple[dict[str, Any], ...] = (
    {
        "name": "unchecked-string-index",
        "cells": [
            _md("intro", "## Strings\n\nIndexing a string."),
            _code("greet", 'message = "hello, world"\nprint(message[17])'),
        ],
        "failing": "greet",
        "errors": {"greet": "IndexError"},
        "reply": "`message` has 12 characters, so the valid indices are 0 to 11 and `message[17]` "
        "raises `IndexError`. Nothing in the notebook says which character you wanted; printing "
        "the last one is the closest reading:\n\n" + _py('message = "hello, world"\nprint(message[-1])'),
    },
    {
        "name": "unchecked-list-index",
        "cells": [
            _code("last", "A = [3, 1, 2]\nlast = A[len(A)]"),
            _md("notes", "The last element is used in the next section."),
        ],
        "failing": "last",
        "errors": {"last": "IndexError"},
        "reply": "`A[len(A)]` is one past the end: a list of 3 items has the indices 0, 1 and 2. The "
        "last element is `A[len(A) - 1]` (or simply `A[-1]`):\n\n"
        + _py("A = [3, 1, 2]\nlast = A[len(A) - 1]"),
    },
    {
        "name": "unchecked-zero-hours",
        "cells": [
            _md("intro", "## Pay"),
            _code(
                "rates",
                'weekly_pay = 1200\nhours = 0\nhourly = weekly_pay / hours\nprint(f"{hourly:.2f} per hour")',
            ),
        ],
        "failing": "rates",
        "errors": {"rates": "ZeroDivisionError"},
        "reply": "`hours` is 0, so the division raises `ZeroDivisionError`. A full-time week is "
        "usually 40 hours, so I've used that; change it if your week is different:\n\n"
        + _py('weekly_pay = 1200\nhours = 40\nhourly = weekly_pay / hours\nprint(f"{hourly:.2f} per hour")'),
    },
    {
        "name": "unchecked-half-index",
        "cells": [
            _code("batch", "batch = list(range(10, 20))"),
            _code("middle", "middle = batch[len(batch) / 2]\nprint(middle)"),
        ],
        "failing": "middle",
        "errors": {"middle": "TypeError"},
        "reply": "`len(batch) / 2` is true division, so the index is the float `5.0` and the list "
        "rejects it with `TypeError`. Floor division gives the integer 5:\n\n"
        + _py("middle = batch[len(batch) // 2]\nprint(middle)"),
    },
)


# --------------------------------------------------------------------------- running cells

#: Runs jobs in one subprocess. A job is a list of code cells run like a kernel runs them: in
#: order, in a fresh namespace, each once, going on after an error. Reads [jobs, limit] on stdin;
#: prints, per job, each cell's error type (null: it passed), or null for the whole job if it
#: ran longer than ``limit`` seconds (a hang, an endless loop).
RUNNER = r"""
import io, json, signal, sys

class _Late(BaseException):
    pass

def _late(*_):
    raise _Late()

signal.signal(signal.SIGALRM, _late)
jobs, limit = json.loads(sys.stdin.read())
real_stdout = sys.stdout
results = []
for job in jobs:
    sys.stdout = io.StringIO()  # what the cells print is not the result
    ns = {"__name__": "__main__"}
    out = []
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        for cell_id, source in job:
            try:
                exec(compile(source, "<cell %s>" % cell_id, "exec"), ns)
                out.append(None)
            except _Late:
                raise
            except BaseException as err:
                out.append(type(err).__name__)
    except _Late:
        out = None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    results.append(out)
real_stdout.write(json.dumps(results))
"""

Job = list[tuple[str, str]]  # (cell id, source) of the code cells, in the order they run
Outcome = list[str | None] | None  # each cell's error type (None: passed); None: it timed out


def run_jobs(jobs: list[Job], limit: float = TIMEOUT_S) -> list[Outcome]:
    """Run ``jobs`` in a subprocess (in a scratch folder, without $ALERT_THRESHOLD_MM)."""
    if not jobs:
        return []
    env = {k: v for k, v in os.environ.items() if k != "ALERT_THRESHOLD_MM"}
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, "-I", "-c", RUNNER],
            input=json.dumps([jobs, limit]),
            capture_output=True,
            text=True,
            timeout=limit * len(jobs) + 60,
            cwd=scratch,
            env=env,
        )
    if done.returncode != 0:
        raise SystemExit(f"the cell runner crashed: {done.stderr[-800:]}")
    return json.loads(done.stdout)


def _code_cells(cells: list[dict[str, Any]], sources: dict[str, str] | None = None) -> Job:
    sources = sources or {}
    return [(c["id"], sources.get(c["id"], c["source"])) for c in cells if c["type"] == "code"]


def _judge_job(program: str, asserts: tuple[str, ...]) -> Job:
    """The program, then each assert as a cell of its own: which asserts it fails."""
    return [("program", program), *((f"assert-{i}", a) for i, a in enumerate(asserts))]


# --------------------------------------------------------------------------- programs and asserts


@dataclass(frozen=True)
class Program:
    corpus: str
    key: str
    name: str  # the function's name
    buggy: str  # the function cell as the student has it
    fixed: str  # the same cell with the corpus's solution
    exercise: str  # the docstring, as the exercise text
    asserts: tuple[str, ...]  # every single-line assert of its tests, as a student writes them

    @property
    def short_asserts(self) -> tuple[str, ...]:
        return tuple(a for a in self.asserts if len(a) <= MAX_ASSERT_LEN)


def _load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _unstar(line: str, name: str) -> str:
    """``assert f(*[1, 2]) == 3`` (QuixBugs' form) as a student writes it: ``assert f(1, 2) == 3``."""
    raw = line.encode()  # ast offsets count UTF-8 bytes
    calls = [
        node
        for node in ast.walk(ast.parse(line))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Starred)
        and isinstance(node.args[0].value, ast.List)
    ]
    for call in sorted(calls, key=lambda c: c.col_offset, reverse=True):
        starred = call.args[0]
        listed = starred.value
        assert listed.end_col_offset is not None and starred.end_col_offset is not None
        inner = raw[listed.col_offset + 1 : listed.end_col_offset - 1]
        raw = raw[: starred.col_offset] + inner + raw[starred.end_col_offset :]
    return raw.decode()


def _plain_assert(line: str, name: str) -> bool:
    """A one-line assert about the function, without a message."""
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert) or tree.body[0].msg is not None:
        return False
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree.body[0].test))


def _exercise_text(docstring: str) -> str:
    text = docstring.strip()
    if text.startswith('"""') and text.endswith('"""'):
        text = text[3:-3]
    out: list[str] = []
    for line in (line.rstrip() for line in text.strip("\n").splitlines()):
        if line or (out and out[-1]):  # QuixBugs docstrings have runs of blank lines
            out.append(line)
    return "\n".join(out).strip()


def quixbugs_program(row: dict[str, Any]) -> Program:
    name = row["name"]
    asserts = tuple(
        _unstar(line, name)
        for line in row["tests"].splitlines()
        if line.startswith("assert ") and _plain_assert(line, name)
    )
    return Program(
        "quixbugs",
        name,
        name,
        row["buggy_program"].strip("\n").rstrip(),
        row["solution"].strip("\n").rstrip(),
        _exercise_text(row["docstring"]),
        asserts,
    )


def humaneval_program(row: dict[str, Any]) -> Program:
    name = row["entry_point"]
    asserts = tuple(
        line.strip()
        for line in row["test"].splitlines()
        if line.strip().startswith("assert ") and _plain_assert(line.strip(), name)
    )
    prompt = row["prompt"].lstrip("\n")
    return Program(
        "humanevalfix",
        row["task_id"],
        name,
        (prompt + row["buggy_solution"]).rstrip(),
        (prompt + row["canonical_solution"]).rstrip(),
        _exercise_text(row["docstring"]),
        asserts,
    )


def load_programs() -> dict[tuple[str, str], Program]:
    programs = [quixbugs_program(r) for r in _load(QUIXBUGS)]
    programs += [humaneval_program(r) for r in _load(HUMANEVAL)]
    return {(p.corpus, p.key): p for p in programs}


def choose_asserts(program: Program, buggy: Outcome, fixed: Outcome) -> tuple[tuple[str, ...], str]:
    """The checks cell's asserts (the first few that the solution passes, and the first one the
    buggy program fails if none of those does) and the error the buggy program raises there."""
    if buggy is None or fixed is None:
        raise SystemExit(f"{program.key}: its tests do not finish in {TIMEOUT_S} s")
    if buggy[0] is not None or fixed[0] is not None:
        raise SystemExit(f"{program.key}: the program itself raises {buggy[0] or fixed[0]}")
    judged = list(zip(program.short_asserts, buggy[1:], fixed[1:], strict=True))
    usable = [(a, error) for a, error, fixed_error in judged if fixed_error is None]
    chosen = usable[:MAX_ASSERTS]
    if not any(error for _, error in chosen):
        chosen += [next(((a, e) for a, e in usable if e), ("", None))]
    error = next((e for _, e in chosen if e), None)
    if error is None:
        raise SystemExit(f"{program.key}: the buggy program passes every usable assert")
    if error == "RecursionError":
        raise SystemExit(f"{program.key}: the buggy program recurses forever ({error})")
    return tuple(a for a, _ in chosen), error


# --------------------------------------------------------------------------- building the cases


def _function_span(source: str, name: str) -> tuple[int, int]:
    """The lines [start, end) of the top-level definition of ``name`` in ``source``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            return start, node.end_lineno or node.lineno
    raise SystemExit(f"no function {name} in\n{source}")


def _split(source: str, name: str) -> tuple[str, str, str]:
    """``source`` as (lines above the function, the function, lines below)."""
    lines = source.splitlines(keepends=True)
    start, end = _function_span(source, name)
    return "".join(lines[:start]), "".join(lines[start:end]).rstrip("\n"), "".join(lines[end:])


def _with_docstring(function: str, docstring: str) -> str:
    if not docstring:
        return function
    first, _, rest = function.partition("\n")
    return f'{first}\n    """{docstring}"""\n{rest}'


def _nbgrader(grade_id: str, *, grade: bool, solution: bool, locked: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "grade": grade,
        "solution": solution,
        "locked": locked,
        "grade_id": grade_id,
        "schema_version": 3,
    }
    if grade:
        meta["points"] = 1
    return {"nbgrader": meta}


def _cell_id(seed: str) -> str:
    """An id like the ones Jupyter gives new cells (nbgrader notebooks keep them)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:8]


def _reply(pick: Pick, label: str, checks_label: str, fixed_cell: str, function: str, checks: str) -> str:
    shape = pick.shape
    if shape == "function-above-checks":
        head, body, _ = _split(fixed_cell, function)
        head = pick.reply_head if pick.reply_head is not None else head
        return f"{pick.prose}\n\n" + _py(f"{head}{body}\n\n\n{checks}")
    if shape == "labelled-blocks":
        text = f"{pick.prose}\n\n### {label}\n\n" + _py(fixed_cell)
        if pick.checks_block:
            text += f"\n\n{pick.checks_block}\n\n### {checks_label}\n\n" + _py(checks)
        return text
    if shape == "whole-cell":
        return f"{pick.prose}\n\n" + _py(fixed_cell)
    if shape == "comment-label":
        return f"{pick.prose}\n\n" + _py(f"# {label}\n{fixed_cell}")
    if shape == "prose-around":
        return f"{pick.prose}\n\n" + _py(fixed_cell) + f"\n\n{pick.after}"
    raise SystemExit(f"unknown reply shape {shape}")


def _case_name(program: Program, kind: str) -> str:
    if program.corpus == "quixbugs":
        return f"quixbugs-{program.name.replace('_', '-')}-{kind}"
    number = program.key.split("/")[1]
    return f"humanevalfix-{number}-{program.name.replace('_', '-').lower()}-{kind}"


@dataclass(frozen=True)
class Check:
    """A run that verifies a case: ``job`` must raise exactly ``errors`` (cell id -> type)."""

    what: str
    job: Job
    errors: dict[str, str]


def program_case(
    pick: Pick, program: Program, buggy: Outcome, fixed: Outcome
) -> tuple[dict[str, Any], list[Check]]:
    name = program.name
    asserts, error = choose_asserts(program, buggy, fixed)
    checks = "\n".join(asserts)
    head, _, tail = _split(program.buggy, name)
    fixed_head, fixed_fn, fixed_tail = _split(program.fixed, name)
    if (head, tail) != (fixed_head, fixed_tail):
        raise SystemExit(f"{program.key}: the solution changes more than the function")
    fixed_cell = head + _with_docstring(fixed_fn, pick.docstring) + tail
    if pick.kind == "nbgrader":
        ids = {k: _cell_id(f"{program.key}:{k}") for k in ("task", "solution", "tests")}
        task_meta = _nbgrader(f"{name}-task", grade=False, solution=False, locked=True)
        fn_meta = _nbgrader(f"{name}-solution", grade=False, solution=True, locked=False)
        checks_meta = _nbgrader(f"{name}-tests", grade=True, solution=False, locked=True)
    else:
        ids = {"task": "task", "solution": name, "tests": "checks"}
        task_meta = fn_meta = checks_meta = {}
    task = (
        f"## Exercise: `{name}`\n\nComplete the function in the next cell; the cell after it checks "
        f"it.\n\n```text\n{program.exercise}\n```"
    )
    cells = [
        {"id": ids["task"], "type": "markdown", "source": task, "metadata": task_meta},
        {"id": ids["solution"], "type": "code", "source": program.buggy, "metadata": fn_meta},
        {"id": ids["tests"], "type": "code", "source": checks, "metadata": checks_meta},
    ]
    label, checks_label = f"In [1] (cell '{ids['solution']}')", f"In [2] (cell '{ids['tests']}')"
    if program.corpus == "quixbugs":
        origin = f"QuixBugs {name} (corpora/quixbugs_python.jsonl, {LICENCE})"
    else:
        origin = f"HumanEvalFix {program.key} {name} (corpora/humanevalpack_python.jsonl, {LICENCE})"
    case = {
        "name": _case_name(program, pick.kind),
        "origin": origin,
        "kind": pick.kind,
        "reply_shape": pick.shape,
        "cells": cells,
        "replies": [_reply(pick, label, checks_label, fixed_cell, name, checks)],
        "args": list(ARGS),
        "expect": {
            "changed": {ids["solution"]: fixed_cell},
            "identical": [ids["tests"], ids["task"]],
            "status": {ids["tests"]: "fixed"},
            "cause": {ids["tests"]: ids["solution"]},
            "errors": {ids["tests"]: error},
            "applied": True,
        },
    }
    return case, [
        Check("the notebook", _code_cells(cells), {ids["tests"]: error}),
        Check("with the fix", _code_cells(cells, {ids["solution"]: fixed_cell}), {}),
    ]


def _others(cells: list[dict[str, Any]], changed: dict[str, str]) -> list[str]:
    return [c["id"] for c in cells if c["id"] not in changed]


def _reply_code(reply: str) -> str:
    start = reply.index("```python\n") + len("```python\n")
    return reply[start : reply.index("\n```", start)]


def cascade_case(spec: dict[str, Any]) -> tuple[dict[str, Any], list[Check]]:
    cells, failing, then = spec["cells"], spec["failing"], spec["then"]
    case = {
        "name": spec["name"],
        "origin": HANDWRITTEN,
        "kind": "cascade",
        "reply_shape": "decline",
        "cells": cells,
        "replies": spec["replies"],
        "args": list(ARGS),
        "expect": {
            "changed": {},
            "identical": _others(cells, {}),
            "status": {failing: "unfixed", then: "unfixed"},
            "cause": {then: failing},
            "errors": spec["errors"],
            "applied": False,
        },
    }
    wrong_patch = _code_cells(cells, {then: _reply_code(spec["replies"][1])})
    return case, [
        Check("the notebook", _code_cells(cells), spec["errors"]),
        Check("with the wrong patch", wrong_patch, {failing: spec["errors"][failing]}),
    ]


def moved_order(cells: list[dict[str, Any]], cell: str, above: str) -> list[dict[str, Any]]:
    """``cells`` with ``cell`` taken out and put directly above ``above``."""
    moving = next(c for c in cells if c["id"] == cell)
    rest = [c for c in cells if c["id"] != cell]
    at = next(i for i, c in enumerate(rest) if c["id"] == above)
    return [*rest[:at], moving, *rest[at:]]


def below_case(spec: dict[str, Any]) -> tuple[dict[str, Any], list[Check]]:
    cells, failing, defining = spec["cells"], spec["failing"], spec["defining"]
    case = {
        "name": spec["name"],
        "origin": HANDWRITTEN,
        "kind": "below",
        "reply_shape": "invented-definition",
        "cells": cells,
        "replies": [spec["reply"]],
        "args": list(ARGS),
        "expect": {
            "changed": {},
            "identical": _others(cells, {}),
            "status": {failing: "fixed"},
            "cause": {failing: defining},
            "errors": {failing: "NameError"},
            "moved": {"cell": defining, "above": failing},
            "applied": True,
        },
    }
    return case, [
        Check("the notebook", _code_cells(cells), {failing: "NameError"}),
        Check("with the cell moved", _code_cells(moved_order(cells, defining, failing)), {}),
        Check("with the invented definition", _code_cells(cells, {failing: _reply_code(spec["reply"])}), {}),
    ]


def unchecked_case(spec: dict[str, Any]) -> tuple[dict[str, Any], list[Check]]:
    cells, failing = spec["cells"], spec["failing"]
    case = {
        "name": spec["name"],
        "origin": HANDWRITTEN,
        "kind": "unchecked",
        "reply_shape": "literal-edit",
        "cells": cells,
        "replies": [spec["reply"]],
        "args": list(ARGS),
        "expect": {
            "changed": {},
            "identical": _others(cells, {}),
            "status": {failing: "proposal"},
            "cause": {failing: failing},
            "errors": spec["errors"],
            "applied": False,
        },
    }
    return case, [
        Check("the notebook", _code_cells(cells), spec["errors"]),
        Check("with the proposal", _code_cells(cells, {failing: _reply_code(spec["reply"])}), {}),
    ]


def build_cases() -> list[dict[str, Any]]:
    """Every case, verified: two subprocess runs (judge the programs' asserts, run every check)."""
    programs = load_programs()
    chosen = [programs[pick.corpus, pick.key] for pick in PICKS]
    judged = run_jobs(
        [_judge_job(getattr(p, v), p.short_asserts) for p in chosen for v in ("buggy", "fixed")]
    )
    built = [
        program_case(pick, program, judged[2 * i], judged[2 * i + 1])
        for i, (pick, program) in enumerate(zip(PICKS, chosen, strict=True))
    ]
    built += [cascade_case(spec) for spec in CASCADES]
    built += [below_case(spec) for spec in BELOW]
    built += [unchecked_case(spec) for spec in UNCHECKED]
    checks = [(case["name"], check) for case, cks in built for check in cks]
    for (name, check), outcome in zip(checks, run_jobs([c.job for _, c in checks]), strict=True):
        if outcome is None:
            raise SystemExit(f"{name} ({check.what}): the cells do not finish in {TIMEOUT_S} s")
        errors = {cell_id: error for (cell_id, _), error in zip(check.job, outcome, strict=True) if error}
        if errors != check.errors:
            raise SystemExit(f"{name} ({check.what}): the cells raise {errors}, not {check.errors}")
    cases = [case for case, _ in built]
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        raise SystemExit("two cases have the same name")
    return cases


def dump(case: dict[str, Any]) -> str:
    return json.dumps(case, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def write(out: Path) -> list[Path]:
    cases = build_cases()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    written = []
    for case in cases:
        path = out / f"{case['name']}.json"
        path.write_text(dump(case), encoding="utf-8")
        written.append(path)
    return written


# --------------------------------------------------------------------------- screening


def screen() -> None:
    """How every program of both corpora behaves on its short asserts: what PICKS was chosen from.

    One letter per assert: ``.`` passed, else the error's initial (A: AssertionError); a program
    whose tests need more than TIMEOUT_S seconds "hangs"."""
    raw = {r["name"]: r for r in _load(QUIXBUGS)}
    programs = [
        p
        for p in load_programs().values()
        if p.corpus != "quixbugs" or "class Node" not in raw[p.key]["tests"]
    ]
    print("QuixBugs programs left out (their tests need Node classes from other files):")
    print("  " + ", ".join(sorted(n for n, r in raw.items() if "class Node" in r["tests"])))
    judged = run_jobs(
        [_judge_job(getattr(p, v), p.short_asserts) for p in programs for v in ("buggy", "fixed")]
    )
    for i, program in enumerate(programs):
        buggy, fixed = judged[2 * i], judged[2 * i + 1]
        verdict = "hangs" if buggy is None else "".join("." if e is None else e[0] for e in buggy[1:])
        solution = "solution passes" if fixed is not None and not any(fixed) else f"solution: {fixed}"
        print(f"{program.corpus:12} {program.key:28} {program.name:30} {verdict or '-':20} {solution}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where to write the cases")
    parser.add_argument("--screen", action="store_true", help="print how every corpus program behaves")
    args = parser.parse_args(argv)
    if args.screen:
        screen()
        return 0
    written = write(args.out)
    print(f"wrote {len(written)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
