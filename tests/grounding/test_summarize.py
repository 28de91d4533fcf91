"""Tests for nbrefine.grounding.summaries and .redaction: bounded value summaries and secret redaction."""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbrefine.grounding import (
    REDACTED,
    Redactor,
    ValueSummary,
    render_summaries,
    summarize_names,
    summarize_value,
)

TOKEN = "zz-9f8e7d6c5b4a3"
ANTHROPIC_KEY = "sk-ant-api03-Xq7Lm2Pz9Rt4Kw8Nv1Bc6Hd3Fg5Js0Ya-EuQwErTy12"


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


# --------------------------------------------------------------------------------------
# The module itself
# --------------------------------------------------------------------------------------


def test_grounding_imports_neither_ipython_nor_numpy_nor_pandas() -> None:
    # The bottom layer loads in a fresh interpreter without pulling in IPython or the data libraries.
    code = (
        "import sys\n"
        "from nbrefine.grounding import summarize_value\n"
        "print(summarize_value([1, 2]))\n"
        "print(sorted(m for m in ('IPython', 'numpy', 'pandas') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["list (len 2) [1, 2]", "[]"]


def test_summaries_of_numpy_values_once_numpy_is_loaded() -> None:
    from nbrefine.grounding import summarize_value

    assert summarize_value(np.arange(3)).startswith("ndarray shape=(3,) dtype=int64")


# --------------------------------------------------------------------------------------
# Scalars and strings
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, "int 7"),
        (-2.5, "float -2.5"),
        (True, "bool True"),
        (None, "None"),
        (1 + 2j, "complex (1+2j)"),
        ("hello world!", "str (len 12) 'hello world!'"),
        (b"ab", "bytes (len 2) b'ab'"),
    ],
)
def test_scalars(value: object, expected: str) -> None:
    assert summarize_value(value) == expected


def test_long_string_shows_length_head_and_marker() -> None:
    text = "abc" * 100_000
    summary, elapsed = timed(summarize_value, text, max_chars=120)
    assert summary.startswith("str (len 300000) 'abcabc")
    assert summary.endswith(" chars]")
    assert "…[+" in summary
    assert len(summary) <= 120
    assert elapsed < 0.2


def test_multiline_string_stays_on_one_line() -> None:
    assert summarize_value("a\nb") == "str (len 3) 'a\\nb'"


def test_huge_ints_are_not_stringified_whole() -> None:
    assert summarize_value(2**100) == f"int {2**100}"
    big = summarize_value(7**2000)
    assert big.startswith("int ") and "digits" in big and len(big) < 80
    # Beyond Python's int->str digit limit: must not raise.
    assert "digits" in summarize_value(10**20000)


def test_numpy_scalars() -> None:
    assert summarize_value(np.float64(1.5)) == "float64 1.5"
    assert summarize_value(np.int32(3)) == "int32 3"
    assert summarize_value(np.str_("ab")) == "str_ (len 2) 'ab'"


# --------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------


def test_small_containers() -> None:
    assert summarize_value([1, "a", None]) == "list (len 3) [1, 'a', None]"
    assert summarize_value((1,)) == "tuple (len 1) (1,)"
    assert summarize_value({3}) == "set (len 1) {3}"
    assert summarize_value(frozenset()) == "frozenset (len 0) {}"
    assert summarize_value(collections.deque([1, 2], maxlen=5)) == "deque (len 2, maxlen 5) [1, 2]"
    assert summarize_value({"a": 1, "b": [1, 2]}) == "dict (len 2) {'a': 1, 'b': [1, 2]}"
    assert summarize_value(collections.OrderedDict(a=1)) == "OrderedDict (len 1) {'a': 1}"


def test_nesting_is_bounded_at_depth_two() -> None:
    assert summarize_value([[1, [2, [3]]]]) == "list (len 1) [[1, [...]]]"
    assert summarize_value({"a": {"b": {"c": 1}}}) == "dict (len 1) {'a': {'b': {...}}}"


class CountingList(list[int]):
    """A list that counts how many items were iterated."""

    pulled = 0

    def __iter__(self) -> Any:
        for item in super().__iter__():
            CountingList.pulled += 1
            yield item


def test_huge_list_only_samples_first_items() -> None:
    CountingList.pulled = 0
    values = CountingList(range(1_000_000))
    summary, elapsed = timed(summarize_value, values)
    assert summary.startswith("CountingList (len 1000000) [0, 1, 2, 3")
    assert summary.endswith(", ...]")
    assert CountingList.pulled <= 10
    assert elapsed < 0.2


def test_huge_dict_shows_key_sample_and_item_previews() -> None:
    d = {f"key{i}": i for i in range(1200)}
    summary, elapsed = timed(summarize_value, d)
    assert summary.startswith("dict (len 1200) keys sample: ['key0', 'key1', 'key2'")
    assert "..." in summary
    assert "items: {'key0': 0, 'key1': 1, 'key2': 2, ...}" in summary
    assert "key500" not in summary
    assert len(summary) <= 300
    assert elapsed < 0.2


def test_huge_set_and_tuple() -> None:
    assert summarize_value(set(range(10**6))).startswith("set (len 1000000) {")
    assert summarize_value(tuple(range(10**6))).startswith("tuple (len 1000000) (0, 1, 2")


def test_recursive_containers() -> None:
    lst: list[Any] = [1, 2]
    lst.append(lst)
    assert summarize_value(lst) == "list (len 3) [1, 2, [...]]"
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    assert summarize_value(d) == "dict (len 2) {'a': 1, 'self': {...}}"


def test_long_strings_inside_containers_are_cut() -> None:
    summary = summarize_value(["x" * 10_000, "y"])
    assert summary.startswith("list (len 2) ['xxxx")
    assert "…[+" in summary and "'y'" in summary
    assert len(summary) < 120


def test_namedtuple_and_dataclass() -> None:
    point = collections.namedtuple("point", "x y")
    assert summarize_value(point(1, [2])) == "namedtuple point(x=1, y=[2])"

    @dataclasses.dataclass
    class Cfg:
        name: str
        sizes: list[int]

    assert summarize_value(Cfg("a", list(range(100)))) == (
        "dataclass test_namedtuple_and_dataclass.<locals>.Cfg(name='a', sizes=[0, 1, 2, 3, ...])"
    )


def test_dict_views_and_range() -> None:
    d = {i: i for i in range(100)}
    assert summarize_value(d.keys()).startswith("dict_keys (len 100) [0, 1, 2")
    assert summarize_value(range(10)) == "range range(0, 10)"


# --------------------------------------------------------------------------------------
# numpy and pandas
# --------------------------------------------------------------------------------------


def test_small_ndarray() -> None:
    assert summarize_value(np.arange(4)) == "ndarray shape=(4,) dtype=int64 [0, 1, 2, 3]"
    two_d = summarize_value(np.ones((2, 2)))
    assert two_d == "ndarray shape=(2, 2) dtype=float64 [[1., 1.], [1., 1.]]"


def test_huge_ndarray_is_fast_and_bounded() -> None:
    gib = np.zeros((1 << 27,))  # 1 GiB of virtual, untouched zero pages
    summarize_value(gib)  # warm numpy's formatting machinery
    summary, elapsed = timed(summarize_value, gib)
    assert summary.startswith("ndarray shape=(134217728,) dtype=float64 (1.0 GiB)")
    assert "..." in summary
    assert len(summary) <= 300
    assert elapsed < 0.2


def test_broadcast_array_many_dimensions() -> None:
    huge = np.broadcast_to(np.arange(3.0), (1 << 20, 1 << 10, 3))  # 24 GiB, no memory
    summary, elapsed = timed(summarize_value, huge, max_chars=200)
    assert summary.startswith("ndarray shape=(1048576, 1024, 3) dtype=float64")
    assert len(summary) <= 200
    assert elapsed < 0.2
    four_d = summarize_value(np.broadcast_to(np.float32(2), (100, 100, 100, 100)))
    assert "shape=(100, 100, 100, 100) dtype=float32" in four_d
    assert "first values: [2., 2., 2., 2., 2., 2., ...]" in four_d


def test_ndarray_edge_cases() -> None:
    assert summarize_value(np.zeros((0, 3))) == "ndarray shape=(0, 3) dtype=float64 []"
    assert summarize_value(np.array(3.5)) == "ndarray shape=() dtype=float64 3.5"
    assert summarize_value([np.arange(2), np.zeros((5, 5))]) == (
        "list (len 2) [ndarray([0, 1], dtype=int64), ndarray(shape=(5, 5), dtype=float64)]"
    )


@pytest.fixture(scope="module")
def big_frame() -> pd.DataFrame:
    n = 1_000_000
    return pd.DataFrame(
        {
            "a": np.arange(n, dtype=np.int64),
            "b": np.array(["x", "y"] * (n // 2), dtype=object),
            "c": np.linspace(0, 1, n),
        }
    )


def test_million_row_dataframe(big_frame: pd.DataFrame) -> None:
    summarize_value(big_frame)  # warm pandas' formatting machinery
    summary, elapsed = timed(summarize_value, big_frame)
    lines = summary.splitlines()
    assert lines[0] == "DataFrame 1000000 rows × 3 columns"
    assert lines[1].startswith("columns: a: int64, b: ")
    assert "c: float64" in lines[1]
    assert lines[2].split() == ["a", "b", "c"]  # header of the head(3) preview
    assert lines[3].split()[:3] == ["0", "0", "x"]
    assert len(lines) == 6
    assert len(summary) <= 300
    assert elapsed < 0.2


def test_wide_dataframe_caps_columns(big_frame: pd.DataFrame) -> None:
    wide = pd.DataFrame(np.zeros((10, 500)), columns=[f"col_{i}" for i in range(500)])
    summary = summarize_value(wide)
    assert summary.startswith("DataFrame 10 rows × 500 columns\ncolumns: col_0: float64, col_1: float64")
    assert "more)" in summary
    assert "col_499" not in summary
    assert len(summary) <= 300


def test_dataframe_with_non_range_index(big_frame: pd.DataFrame) -> None:
    summary = summarize_value(big_frame.set_index("b"), max_chars=600)
    assert "index: Index len 1000000" in summary


def test_series_and_index(big_frame: pd.DataFrame) -> None:
    series, elapsed = timed(summarize_value, big_frame["c"])
    assert series.startswith("Series 'c' len 1000000 dtype float64 first: [0.0, 1.000001000001e-06")
    assert elapsed < 0.2
    assert summarize_value(big_frame.index) == "RangeIndex(start=0, stop=1000000, step=1)"
    labels = summarize_value(pd.Index(list("abcdefg")))
    assert labels.startswith("Index len 7 dtype ")
    assert labels.endswith("first: ['a', 'b', 'c', 'd', 'e', ...]")
    keyed = summarize_value(pd.Series([1, 2], index=["x", "y"], name="n"))
    assert keyed == "Series 'n' len 2 dtype int64 first: ['x': 1, 'y': 2]"


def test_pandas_objects_inside_containers(big_frame: pd.DataFrame) -> None:
    summary = summarize_value({"df": big_frame, "s": big_frame["a"]})
    assert summary == (
        "dict (len 2) {'df': <DataFrame 1000000 rows × 3 columns>, 's': <Series 'a' len 1000000 dtype int64>}"
    )


# --------------------------------------------------------------------------------------
# Modules, callables, iterators
# --------------------------------------------------------------------------------------


def sample_function(x: int, y: list[int] = [1] * 1000, *args: Any, flag: bool = False) -> int:
    return x


def test_modules_functions_classes() -> None:
    assert summarize_value(np) == "module numpy"
    assert summarize_value(os.path).startswith("module ")
    assert summarize_value(sample_function) == (
        "function sample_function(x: 'int', y: 'list[int]' = [...], *args: 'Any', flag: 'bool' = False)"
        " -> 'int'"
    )
    assert summarize_value(len) == "builtin len(obj, /)"
    assert summarize_value(lambda a, b=2: a).startswith(
        "function test_modules_functions_classes.<locals>.<lambda>(a, b=2)"
    )
    assert summarize_value(collections.Counter).startswith("class collections.Counter(")
    assert summarize_value(ValueSummary).startswith(
        "class nbrefine.grounding.summaries.summarize.ValueSummary(name: 'str'"
    )
    assert (
        summarize_value([sample_function, np]) == "list (len 2) [<function sample_function>, <module numpy>]"
    )


def test_generator_is_not_consumed() -> None:
    def numbers() -> Any:
        yield 1
        yield 2

    gen = numbers()
    summary = summarize_value(gen)
    assert summary.startswith("generator test_generator_is_not_consumed.<locals>.numbers (created)")
    assert "not consumed" in summary
    assert next(gen) == 1
    summarize_value([gen, gen])
    assert next(gen) == 2


def test_iterators_are_not_consumed() -> None:
    it = iter([1, 2, 3])
    mapped = map(str, [1, 2])
    assert summarize_value(it) == "list_iterator object"
    assert summarize_value(mapped) == "map object"
    assert next(it) == 1
    assert next(mapped) == "1"


# --------------------------------------------------------------------------------------
# Hostile objects
# --------------------------------------------------------------------------------------


class BadRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr for you")


class BadLen(list[int]):
    def __len__(self) -> int:
        raise RuntimeError("len broke")


class BadIter(list[int]):
    def __iter__(self) -> Any:
        raise KeyError("iter broke")


class BadReprWith:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class SleepyRepr:
    def __repr__(self) -> str:
        time.sleep(5)
        return "finally"


class SlowItem:
    def __repr__(self) -> str:
        time.sleep(0.08)
        return "slow"


class Plain:
    def __init__(self) -> None:
        self.rows = 3
        self.name = "plain"


class BadProperty:
    @property
    def boom(self) -> int:
        raise OSError("disk gone")


def test_repr_that_raises() -> None:
    assert summarize_value(BadRepr()) == "BadRepr <repr failed: ValueError: no repr for you>"
    assert summarize_value([BadRepr(), 1]) == "list (len 2) [<repr failed: ValueError: no repr for you>, 1]"


def test_len_and_iter_that_raise() -> None:
    assert summarize_value(BadLen([1, 2])) == "BadLen (len ?) [1, 2]"
    assert summarize_value(BadIter([1, 2])) == "BadIter (len 2) [<iteration failed: KeyError: 'iter broke'>]"


def test_dataclass_field_that_raises() -> None:
    @dataclasses.dataclass
    class Holder:
        x: int

    h = Holder(1)
    del h.x
    assert summarize_value(h).startswith(
        "dataclass test_dataclass_field_that_raises.<locals>.Holder(x=<failed: Attribu"
    )


def test_default_repr_object_shows_attributes_and_property_is_not_called() -> None:
    assert summarize_value(Plain()) == "Plain object; attributes: rows=3, name='plain'"
    assert summarize_value(BadProperty()) == "BadProperty object"


@pytest.mark.timeout(60, method="thread")  # keep ITIMER_REAL free so the summary can use it
def test_repr_that_sleeps_is_cut_off() -> None:
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    handler_before = signal.getsignal(signal.SIGALRM)
    summary, elapsed = timed(summarize_value, SleepyRepr(), time_limit_s=0.2)
    assert elapsed < 1.0
    assert "timed out" in summary
    assert summary.startswith("SleepyRepr")
    # The timer and the handler are put back as they were.
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler_before
    # Partial results are kept.
    nested, elapsed = timed(summarize_value, [1, SleepyRepr(), 3], time_limit_s=0.2)
    assert elapsed < 1.0
    assert nested.startswith("list (len 3) [1, <repr timed out")


@pytest.mark.timeout(60, method="signal")  # pytest-timeout arms ITIMER_REAL: it must be left alone
def test_someone_elses_timer_is_left_alone() -> None:
    remaining_before, _ = signal.getitimer(signal.ITIMER_REAL)
    assert remaining_before > 0
    handler_before = signal.getsignal(signal.SIGALRM)
    summary, elapsed = timed(summarize_value, [SlowItem() for _ in range(20)], time_limit_s=0.2)
    # No timer of ours, but the cooperative deadline still stops between items (20 items: 1.6 s).
    assert elapsed < 1.0
    assert "timed out" in summary
    assert signal.getsignal(signal.SIGALRM) is handler_before
    remaining_after, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < remaining_after <= remaining_before


@pytest.mark.timeout(60, method="thread")
def test_summaries_from_another_thread_use_the_cooperative_deadline() -> None:
    results: list[str] = []
    thread = threading.Thread(
        target=lambda: results.append(summarize_value([SlowItem() for _ in range(20)], time_limit_s=0.2))
    )
    start = time.perf_counter()
    thread.start()
    thread.join(10)
    assert time.perf_counter() - start < 1.0
    assert "timed out" in results[0]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


class BadStrLen(str):
    def __len__(self) -> int:
        raise ValueError("no len")


def test_never_raises_and_never_warns(recwarn: pytest.WarningsRecorder) -> None:
    assert summarize_value(BadStrLen("abc")).startswith("BadStrLen <summary failed: ValueError: no len")
    masked = summarize_value(np.ma.masked_array([1, 2, 3], mask=[0, 1, 0]))  # numpy warns while formatting
    assert masked == "MaskedArray shape=(3,) dtype=int64 [1, --, 3]"
    assert not [w for w in recwarn.list if "context" in w.filename or "numpy" in w.filename]


def test_max_chars_is_always_respected(big_frame: pd.DataFrame) -> None:
    values: list[object] = [
        "x" * 5000,
        list(range(5000)),
        {str(i): "v" * 100 for i in range(100)},
        big_frame,
        np.arange(10**6).reshape(1000, 1000),
        BadRepr(),
        sample_function,
        Plain(),
        b"\x00" * 9000,
        [["a" * 50] * 10] * 10,
    ]
    for value in values:
        for max_chars in (1, 10, 40, 80, 300, 1000):
            summary = summarize_value(value, max_chars=max_chars)
            assert len(summary) <= max_chars, (max_chars, summary)


# --------------------------------------------------------------------------------------
# Redactor: names
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "API_KEY", "api_key", "apikey", "apiKey", "db_password", "githubToken", "AWS_SECRET_ACCESS_KEY",
        "auth_header", "token", "secret", "passwd", "pwd", "credentials", "auth", "private_key",
        "access_key", "session_key", "bearer", "cookie", "X-Api-Key", "Authorization", "githubtoken",
        "client_secret", "refresh_token", "OPENAI_API_KEY",
    ],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert Redactor(environ={}).is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "monkey", "keyboard", "max_tokens", "tokenizer", "n_tokens", "tokens", "key", "keys", "sort_key",
        "primary_key", "token_ids", "password_length", "author", "authority", "df", "turkey", "whiskey",
        "is_authenticated", "secret_name", "hotkey",
    ],
)  # fmt: skip
def test_ordinary_names(name: str) -> None:
    assert not Redactor(environ={}).is_secret_name(name)


# --------------------------------------------------------------------------------------
# Redactor: environment values
# --------------------------------------------------------------------------------------


def test_env_values_are_redacted_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    redactor = Redactor()
    text = f"url = 'https://svc.example/v1?k={TOKEN}&x=1'\nprint('{TOKEN}')\nboth:{TOKEN}{TOKEN}"
    out = redactor.redact_text(text)
    assert TOKEN not in out
    assert out.count("<redacted:env MY_SERVICE_TOKEN>") == 4
    assert out.startswith("url = 'https://svc.example/v1?k=<redacted:env MY_SERVICE_TOKEN>&x=1'")
    assert redactor.hits == {"env MY_SERVICE_TOKEN": 4}


LONG_SECRET = "Lq-" + "9f8e7d6c5b4a3210" * 5  # 83 characters: longer than any marker slack


def test_env_values_in_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    monkeypatch.setenv("MY_LONG_SECRET", LONG_SECRET)
    redactor = Redactor()
    url = f"https://svc.example/v1?k={TOKEN}"
    cases: list[object] = [
        url,
        [1, url],
        {"endpoint": url},
        pd.DataFrame({"u": [url, "b"]}),
        pd.Series([url]),
        np.array([url]),
        ValueError(f"bad token {TOKEN}"),
    ]
    # Wherever the cut falls, a secret is never shown in part.
    cases += [("x" * k) + LONG_SECRET + "tail" for k in range(200, 300)]
    cases += [[("y" * k) + LONG_SECRET] for k in range(0, 45)]
    cases += [(b"x" * k) + LONG_SECRET.encode() for k in range(200, 300)]
    cases += [BadReprWith(f"{'z' * k}{LONG_SECRET}") for k in range(200, 300)]
    for value in cases:
        summary = redactor.summarize("thing", value)
        for secret in (TOKEN, LONG_SECRET):
            for n in range(4, len(secret) + 1):  # not even a part of it
                assert secret[:n] not in summary.text, (value, summary.text)
        assert len(summary.text) <= 300


def test_env_value_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "SHORT": "abc12",  # shorter than min_env_value_len
        "NUMBER": "8080123",  # digits, shorter than 10
        "FLAG": "false",
        "LONGNUM": "12345678901",
        "ESCAPED": "pa'ss\"wd\\x1",
    }
    redactor = Redactor(env)
    out = redactor.redact_text("abc12 8080123 false 12345678901")
    assert out == "abc12 8080123 false <redacted:env LONGNUM>"
    # The value also appears repr-escaped in summaries.
    assert "pa'ss" not in redactor.summarize("v", env["ESCAPED"]).text
    assert Redactor(env, min_env_value_len=3).redact_text("abc12") == "<redacted:env SHORT>"


def test_extra_secret_values_and_longest_first() -> None:
    redactor = Redactor({"A": "secret-part", "B": "secret-part-longer"}, extra_secret_values=["hunter22"])
    assert redactor.redact_text("secret-part-longer / secret-part / hunter22") == (
        "<redacted:env B> / <redacted:env A> / <redacted:known secret>"
    )


def test_environ_is_snapshotted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBREFINE_TEST_SNAPSHOT", "before-value-1")
    redactor = Redactor()
    monkeypatch.setenv("NBREFINE_TEST_SNAPSHOT", "after-value-2")
    assert redactor.redact_text("before-value-1 after-value-2") == (
        "<redacted:env NBREFINE_TEST_SNAPSHOT> after-value-2"
    )


# --------------------------------------------------------------------------------------
# Redactor: variables, dicts, secret-shaped values
# --------------------------------------------------------------------------------------


def test_secret_named_variables_are_not_rendered() -> None:
    redactor = Redactor(environ={})
    summary = redactor.summarize("db_password", "hunter2")
    assert summary == ValueSummary("db_password", "str", "<redacted:credential name>", redacted=True)
    df_summary = redactor.summarize("api_key", pd.DataFrame({"a": [1]}))
    assert df_summary.type_name == "DataFrame" and df_summary.text == "<redacted:credential name>"
    assert redactor.summarize("monkey", "banana") == ValueSummary("monkey", "str", "str (len 6) 'banana'")


def test_dict_keys_with_secret_names_and_user_dict_untouched() -> None:
    redactor = Redactor(environ={})
    config = {"api_key": "abc123", "user": "bob", "nested": {"password": "pw1", "port": 5432}}
    original = {"api_key": "abc123", "user": "bob", "nested": {"password": "pw1", "port": 5432}}
    summary = redactor.summarize("config", config)
    assert summary.redacted
    assert "abc123" not in summary.text and "pw1" not in summary.text
    assert summary.text == (
        "dict (len 3) {'api_key': <redacted:credential name>, 'user': 'bob', "
        "'nested': {'password': <redacted:credential name>, 'port': 5432}}"
    )
    assert config == original


def test_secret_attributes_fields_and_columns() -> None:
    redactor = Redactor(environ={})

    class Client:
        def __init__(self) -> None:
            self.host = "db.local"
            self.auth_token = "t0k3n-value"

    @dataclasses.dataclass
    class Conn:
        user: str
        password: object

    frame = pd.DataFrame({"user": ["a", "b"], "password": ["p1-secret", "p2-secret"]})
    series = pd.Series(["s1-secret"], name="token")
    values = (Client(), Conn("bob", 987654321), frame, series, [Conn("bob", 987654321)])
    for value in values:
        text = redactor.summarize("thing", value).text
        assert "t0k3n" not in text and "-secret" not in text and "987654321" not in text, text
        assert "<redacted:credential name>" in text
    assert frame.loc[0, "password"] == "p1-secret"


def test_secret_shaped_values_in_benign_variables() -> None:
    redactor = Redactor(environ={})
    note = f"key is {ANTHROPIC_KEY}, keep it safe"
    summary = redactor.summarize("note", note)
    assert ANTHROPIC_KEY[:12] not in summary.text
    assert summary.text == f"str (len {len(note)}) 'key is <redacted:secret-like value>, keep it safe'"
    assert summary.redacted


@pytest.mark.parametrize(
    "secret",
    [
        ANTHROPIC_KEY,
        "sk-proj-4f9Xq2Lm7Pz1Rt8Kw3Nv6Bc0Hd5Fg",
        "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "xoxb-123456789012-abcdefghijkl",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----",
        "Bearer aB3dE5gH7jK9mN1pQ3sT",
        "V87TR1Nf8WtxWRXgy_4L82wf-ta4ysNU",  # 32 random url-safe characters
        "postgres://admin:s3cretpw@db.local:5432/app",
    ],
)
def test_secret_shapes(secret: str) -> None:
    redactor = Redactor(environ={})
    assert redactor.looks_like_secret_value(secret)
    out = redactor.redact_text(f"value: {secret} end")
    assert "<redacted:secret-like value>" in out
    assert out.endswith(" end")
    core = secret.removeprefix("Bearer ").split("@")[0][-10:]
    assert core not in out


ORDINARY_TEXT = """\
Traceback (most recent call last):
  File "/home/alice/project/analysis_2023_v2/run.py", line 42, in <module>
    df = pd.read_csv("data/2023/01/15/run3/output4/model5.csv")
  File "/usr/lib/python3.11/site-packages/pandas/core/indexes/base.py", line 3805, in get_loc
KeyError: 'price_2023_01_15_adjusted_close_v2'
The Bearer authentication scheme uses tokens; max_tokens = 4096 and n_tokens = 12.
tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
monkey = "keyboard"; key = "name"; sort_key = "date"
commit 11f6ad8ec52a2984abaafd7c3b516503785c2072, run id 123e4567-e89b-12d3-a456-426614174000
sha256 2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881
test_summarize_value_dataframe_1m_rows DataFrameGroupBySeriesAggregation2023Version
   a  b         c
0  0  x  0.405926
<__main__.Foo object at 0x7f3a2b1c4d50> 2023-01-01T00:00:00.000000
"""


def test_no_false_positives_on_ordinary_text() -> None:
    redactor = Redactor(environ={})
    assert redactor.redact_text(ORDINARY_TEXT) == ORDINARY_TEXT
    assert not redactor.looks_like_secret_value(ORDINARY_TEXT)
    assert redactor.hits == {}


# --------------------------------------------------------------------------------------
# Redactor: literals in code
# --------------------------------------------------------------------------------------


CODE = """\
import os, requests
api_key = "abc123"
password='hunter2'
token: str = "tok-literal"
if passwd == "letmein":
    pass
headers = {"Authorization": "Basic dXNlcjpwYXNz", "Accept": "json"}
payload = {"token": "xyz789", "name": "bob"}
os.environ["GITHUB_TOKEN"] = "gh-literal"
r = requests.get(url, auth=("alice", "wonderland"), timeout=5)
client = Client(api_key='inline-key', region="eu")
token = os.environ["GITHUB_TOKEN"]
greeting = f"Bearer {token}"
auth_header = f"Bearer {token}"
monkey = "banana"
max_tokens = 4096
"""


def test_literals_assigned_to_secret_names_in_code() -> None:
    redactor = Redactor(environ={})
    out = redactor.redact_text(CODE)
    for secret in (
        "abc123", "hunter2", "tok-literal", "letmein", "dXNlcjpwYXNz", "xyz789", "gh-literal",
        "wonderland", "inline-key",
    ):  # fmt: skip
        assert secret not in out, secret
    assert 'api_key = "<redacted:credential name>"' in out
    assert "password='<redacted:credential name>'" in out
    assert '{"Authorization": "<redacted:credential name>", "Accept": "json"}' in out
    assert '{"token": "<redacted:credential name>", "name": "bob"}' in out
    assert 'os.environ["GITHUB_TOKEN"] = "<redacted:credential name>"' in out
    # Code that is not a credential literal is left as it is, so the repair still makes sense.
    for kept in (
        'token = os.environ["GITHUB_TOKEN"]',
        'greeting = f"Bearer {token}"',
        'auth_header = f"Bearer {token}"',
        'monkey = "banana"',
        "max_tokens = 4096",
        'region="eu"',
        "timeout=5",
    ):
        assert kept in out, kept
    assert redactor.hits == {"credential name": 10}


def test_magics_and_http_headers() -> None:
    redactor = Redactor(environ={})
    text = "%env OPENAI_API_KEY=sk-short\n!export GITHUB_TOKEN=abc\nexport PATH=/usr/bin\nCookie: sid=42"
    out = redactor.redact_text(text)
    assert out == (
        "%env OPENAI_API_KEY=<redacted:credential name>\n!export GITHUB_TOKEN=<redacted:credential name>\n"
        "export PATH=/usr/bin\nCookie: <redacted:credential name>"
    )


def test_redaction_is_idempotent_and_counts_once() -> None:
    redactor = Redactor({"SVC_TOKEN": TOKEN})
    text = f'api_key = "{ANTHROPIC_KEY}"\nurl = "{TOKEN}"'
    once = redactor.redact_text(text)
    hits = redactor.hits
    assert redactor.redact_text(once) == once
    assert redactor.hits == hits
    assert sum(hits.values()) == 2


# --------------------------------------------------------------------------------------
# hits
# --------------------------------------------------------------------------------------


def test_hits_count_kinds_not_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    redactor = Redactor()
    assert redactor.hits == {}
    redactor.redact_text(f"{TOKEN} and {TOKEN}")
    redactor.summarize("password", "x")
    redactor.summarize("note", ANTHROPIC_KEY)
    redactor.summarize("cfg", {"api_key": 1, "token": 2})
    redactor.summarize("plain", [1, 2, 3])
    hits = redactor.hits
    assert hits == {"env MY_SERVICE_TOKEN": 2, "credential name": 3, "secret-like value": 1}
    assert TOKEN not in repr(hits) and ANTHROPIC_KEY not in repr(hits)
    hits["credential name"] = 100  # a copy
    assert redactor.hits["credential name"] == 3


def test_secret_only_past_the_cut_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor({"SVC": TOKEN})
    summary = redactor.summarize("blob", "x" * 1000 + TOKEN)
    assert not summary.redacted
    assert redactor.hits == {}
    assert TOKEN not in summary.text


# --------------------------------------------------------------------------------------
# summarize_names / render_summaries
# --------------------------------------------------------------------------------------


def test_summarize_names_order_and_skips() -> None:
    redactor = Redactor(environ={})
    namespace: dict[str, object] = {
        "df": pd.DataFrame({"a": [1, 2]}),
        "x": 3,
        "_hidden": 1,
        "np": np,
        "len": len,
        "print": print,
        "api_key": "sk-nope",
        "name": "bob",
    }
    names = ["name", "missing", "x", "_hidden", "np", "len", "print", "api_key", "df", "x"]
    summaries, left_out = summarize_names(names, namespace, redactor)
    assert left_out == 0
    assert [s.name for s in summaries] == ["name", "x", "api_key", "df"]
    assert [s.type_name for s in summaries] == ["str", "int", "str", "DataFrame"]
    assert summaries[2].redacted and summaries[2].text == "<redacted:credential name>"
    with_modules, _ = summarize_names(["np", "x"], namespace, redactor, skip_modules=False)
    assert [(s.name, s.text) for s in with_modules] == [("np", "module numpy"), ("x", "int 3")]


def test_summarize_names_skips_ipython_helpers() -> None:
    class InteractiveShell:
        def get_ipython(self) -> InteractiveShell:
            return self

    InteractiveShell.__module__ = "IPython.core.interactiveshell"
    history = ["x = 1"]
    outputs: dict[int, object] = {}
    namespace: dict[str, object] = {
        "In": history,
        "Out": outputs,
        "_ih": history,
        "_oh": outputs,
        "get_ipython": InteractiveShell().get_ipython,
        "x": 1,
    }
    summaries, left_out = summarize_names(list(namespace), namespace, Redactor(environ={}))
    assert [s.name for s in summaries] == ["x"] and left_out == 0
    # A user's own variable called In is kept.
    own = {"In": [1, 2]}
    assert [s.name for s in summarize_names(["In"], own, Redactor(environ={}))[0]] == ["In"]


def test_summarize_names_budget() -> None:
    redactor = Redactor(environ={})
    namespace = {f"v{i:02d}": "y" * 1000 for i in range(40)}
    names = list(namespace)
    summaries, left_out = summarize_names(names, namespace, redactor, per_value_chars=200, budget_chars=1000)
    assert summaries and left_out > 0
    assert len(summaries) + left_out == 40
    assert [s.name for s in summaries] == names[: len(summaries)]
    assert all(len(s.text) <= 200 for s in summaries)
    block = render_summaries(summaries)
    assert len(block) <= 1000
    assert len(block) > 1000 - 60  # the budget is used, not wasted
    full = render_summaries(summaries, left_out)
    assert full.endswith(f"[... {left_out} more names left out for the prompt budget]")


def test_summarize_names_budget_counts_multiline_indentation(big_frame: pd.DataFrame) -> None:
    redactor = Redactor(environ={})
    namespace = {f"df{i}": big_frame for i in range(10)}
    summaries, left_out = summarize_names(list(namespace), namespace, redactor, budget_chars=700)
    assert len(render_summaries(summaries)) <= 700
    assert len(summaries) + left_out == 10 and left_out > 0


def test_render_summaries_layout() -> None:
    summaries = [
        ValueSummary("x", "int", "int 3"),
        ValueSummary("df", "DataFrame", "DataFrame 2 rows × 1 columns\ncolumns: a: int64"),
    ]
    assert render_summaries(summaries) == "x: int 3\ndf: DataFrame 2 rows × 1 columns\n    columns: a: int64"
    assert render_summaries([], 3) == "[... 3 more names left out for the prompt budget]"
    assert render_summaries(summaries[:1], 0) == "x: int 3"


def test_redacted_marker_prefix() -> None:
    redactor = Redactor(environ={})
    assert redactor.redact_text("password = 'x1'").count(REDACTED) == 1
    assert all(
        marker.startswith(REDACTED)
        for marker in ("<redacted:credential name>", "<redacted:env X>", "<redacted:secret-like value>")
    )


def test_public_settings_words_and_paths_in_the_environment_are_not_secrets() -> None:
    env = {
        "HOME": "/home/analyst",
        "LOG_LEVEL": "WARNING",
        "LC_ALL": "en_US.UTF-8",
        "DATA_DIR": "/srv/data/warehouse",
        "MY_SERVICE_TOKEN": "/not/a/path/but/secret-named",
        "RANDOM_SETTING": "zz-9f8e7d6c5b4a3",
    }
    redactor = Redactor(env)
    text = "File /home/analyst/x.py: WARNING en_US.UTF-8 /srv/data/warehouse"
    assert redactor.redact_text(text) == text
    assert "<redacted:env MY_SERVICE_TOKEN>" in redactor.redact_text("t=/not/a/path/but/secret-named")
    assert "<redacted:env RANDOM_SETTING>" in redactor.redact_text("v=zz-9f8e7d6c5b4a3")
