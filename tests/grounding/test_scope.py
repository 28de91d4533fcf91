"""nbrefine.grounding.scope: the one scope analysis (reads, bindings, every statement kind)."""

from __future__ import annotations

import ast
import sys

import pytest

from nbrefine.grounding.ipython_names import is_ipython_name, is_ipython_value
from nbrefine.grounding.scope import (
    bound_names,
    free_names,
    global_names,
    parse,
    parse_cell,
    scan,
    scope_nodes,
    surely_bound,
)

py312 = pytest.mark.skipif(sys.version_info < (3, 12), reason="type statements and type parameters: 3.12+")


def test_free_names_follow_evaluation_order_and_scopes():
    code = (
        "import numpy as np\n"
        "total = total + 1\n"
        "y = [i * k for i in data]\n"
        "def f(a):\n    return a + scale + np.pi\n"
        "for row in rows:\n    acc = row\n"
        "scale = 2\n"
        "print(acc, undefined_later)\n"
        "class C(Base):\n    z = factor\n    def m(self):\n        return helper(self)\n"
    )
    expected = ["total", "data", "k", "rows", "print", "undefined_later", "Base", "factor", "helper"]
    assert free_names(code) == expected
    assert free_names("x = (") == []


def test_class_bodies_are_seen_by_themselves_only():
    code = "class A:\n    z = 1\n    w = z + later\n    later = 2\n    def m(self):\n        return z\n"
    assert free_names(code) == ["later", "z"]  # the method's z is the global one
    assert free_names("class A:\n    n = 3\n    xs = [n * i for i in range(n)]") == ["range", "n"]


def test_comprehension_targets_are_their_own_and_a_walrus_binds_outside():
    assert free_names("[x for x in xs if x > lim]\nprint(x)") == ["xs", "lim", "print", "x"]
    names = scan("[last := v for v in values]\nprint(last)")
    assert names.free == ("values", "print")
    assert dict(names.effects) == {"last": True}


def test_global_and_nonlocal():
    code = "def outer():\n    n = 0\n    def inner():\n        nonlocal n\n        n += step\n    inner()"
    assert free_names(code) == ["step"]
    assert free_names("def h():\n    global x\n    return x + 1") == ["x"]
    names = scan("def setup():\n    global cfg\n    cfg = load()\n")
    assert dict(names.effects) == {"setup": True, "cfg": True}  # calling it binds the module's cfg
    assert names.free == ("load",)


def test_match_captures_bind_and_class_patterns_read():
    code = (
        "match event:\n"
        "    case Click(x=px, y=py) if px > limit:\n"
        "        hit = (px, py)\n"
        "    case [first, *rest]:\n"
        "        hit = first\n"
        "    case {'kind': kind, **extra} as whole:\n"
        "        hit = whole\n"
        "print(px, rest, extra, kind)\n"
    )
    names = scan(code)
    assert names.free == ("event", "Click", "limit", "print")
    assert {"px", "py", "first", "rest", "kind", "extra", "whole", "hit"} <= dict(names.effects).keys()
    assert names.lines["whole"] == (1, 7)


@py312
def test_type_statements_and_type_parameters():
    names = scan("type Pair[T] = tuple[T, Other]\ndef first[U](xs: list[U]) -> U:\n    return xs[0]\n")
    assert dict(names.effects) == {"Pair": True, "first": True}
    assert names.free == ("list", "tuple", "Other")  # the alias's value is read lazily: last
    assert surely_bound(parse("type Pair = int").body[0]) == {"Pair"}
    assert free_names("class Box[T](Base[T]):\n    item: T\n    def get(self) -> T: ...") == ["Base"]


def test_except_names_have_no_lasting_effect():
    names = scan("try:\n    run()\nexcept Error as err:\n    log(err)\n")
    assert names.free == ("run", "Error", "log")
    assert dict(names.effects) == {}


def test_deletions_read_and_unbind():
    names = scan("x = 1\ndel x, y\n")
    assert names.free == ("y",)
    assert names.effects == (("x", False), ("y", False))
    assert "x" not in names.lines


def test_ipython_transformed_code_is_read_through():
    code = (
        "files = get_ipython().getoutput('ls')\n"
        "get_ipython().run_line_magic('time', 'total = compute(data)')\n"
        "get_ipython().run_line_magic('timeit', '-n 10 local = f(x)')\n"
        "get_ipython().run_cell_magic('capture', '--no-stderr out', 'print(total, other)\\n')\n"
    )
    names = scan(code)
    assert names.free == ("get_ipython", "compute", "data", "f", "x", "print", "other")
    assert list(dict(names.effects)) == ["files", "total", "out"]  # timeit binds nothing here


def test_strict_counts_only_sure_bindings_and_checks_bodies_where_defined():
    code = "if flag:\n    x = 1\nprint(x)\ndef f():\n    return y\ny = 2\n"
    assert free_names(code) == ["flag", "print"]
    assert free_names(code, strict=True) == ["flag", "print", "x", "y"]


def test_strings_find_names_read_through_strings():
    code = "df.query('a > @limit and b == \"x@y\"')\neval('cfg + 1')\nglobals()['helper']\n"
    assert free_names(code) == ["df", "eval", "globals"]
    assert free_names(code, strings=True) == ["df", "limit", "eval", "cfg", "globals", "helper"]


def test_global_names_in_text_order_without_locals():
    code = "result = table.groupby(key)\ndef g(p):\n    return p + glob\nsquares = [i * i for i in r]\n"
    assert global_names(code) == ["result", "table", "key", "g", "glob", "squares", "r"]


def test_bound_names_of_each_scope_kind():
    tree = parse(
        "def f(a, /, b, *c, d=1, **e):\n"
        "    global g\n"
        "    g = x = 1\n"
        "    import os.path\n"
        "    ys = [y := i for i in r]\n"
        "    match a:\n"
        "        case {**rest}: pass\n"
        "    try: pass\n"
        "    except E as err: del err\n"
        "    def inner(q): z = 1\n"
    )
    function = tree.body[0]
    assert bound_names(function) == {"a", "b", "c", "d", "e", "x", "os", "ys", "y", "rest", "err", "inner"}
    comprehension = next(n for n in ast.walk(tree) if isinstance(n, ast.ListComp))
    assert bound_names(comprehension) == {"i"}
    assert bound_names(parse("class K:\n    attr = 1\n    def m(self): pass").body[0]) == {"attr", "m"}
    lambda_ = parse("lambda u, v=w: u").body[0].value
    assert bound_names(lambda_) == {"u", "v"}
    # A nested scope's body is not this scope's, the parts evaluated here are.
    kinds = [type(n).__name__ for n in scope_nodes(parse("@deco\ndef h(p=dflt):\n    inner_only = 1"))]
    assert "FunctionDef" in kinds and kinds.count("Name") == 2  # deco and dflt


def test_parse_cell_reads_ipython_syntax_line_for_line():
    tree = parse_cell("files = !ls\n%matplotlib inline\nif ok:\n    %time f()\nobj?\nz = 1")
    assert tree is not None
    assert [type(s).__name__ for s in tree.body] == ["Assign", "Pass", "If", "Pass", "Assign"]
    assert tree.body[-1].lineno == 6
    assert parse_cell("x = (") is None


def test_ipython_names_one_definition():
    for name in ("In", "Out", "get_ipython", "exit", "quit", "open", "_", "__", "___", "_ii", "_i3", "_7"):
        assert is_ipython_name(name), name
    for name in ("df", "_private", "input", "i3", "Outcome", "____"):
        assert not is_ipython_name(name), name
    history: list[str] = []
    namespace = {"In": history, "_ih": history, "Out": {}, "_oh": {}}
    assert is_ipython_value("In", history, namespace)
    assert not is_ipython_value("Out", {}, namespace)  # a user's own dict named Out
    assert not is_ipython_value("exit", 3, namespace)
