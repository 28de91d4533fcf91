"""The reply parser and the repair prompt."""

from __future__ import annotations

from nbrefine.engine import Attempt, RepairTask, build_request, parse_reply
from nbrefine.grounding import Redactor, ValueSummary
from nbrefine.grounding.capture import Failure
from nbrefine.grounding.text import TRUNCATED, clip
from nbrefine.providers.base import ProviderRequest
from nbrefine.sandbox import TrialOutcome


def test_parse_takes_the_last_python_block_and_keeps_prose_as_explanation():
    reply = (
        "First idea:\n```python\nx = 1\n```\nBetter:\n```py\nx = 2\nprint(x)\n```\n"
        "```text\nnot code\n```\nDone."
    )
    parsed = parse_reply(reply)
    assert parsed.code == "x = 2\nprint(x)"
    assert "First idea" in parsed.explanation and "Done." in parsed.explanation
    assert parsed.reason is None


def test_parse_accepts_a_block_without_language_tag_and_crlf():
    parsed = parse_reply("Fixed.\r\n```\r\ny = [1, 2]\r\n```\r\n")
    assert parsed.code == "y = [1, 2]"


def test_parse_reports_why_there_is_no_code():
    assert (
        parse_reply("I think the column name is wrong.").reason == "the reply contained no fenced code block"
    )
    cut = parse_reply("Here:\n```python\nx = 1\n")
    assert cut.code is None and "cut off" in (cut.reason or "")
    empty = parse_reply("```python\n\n```")
    assert empty.code is None and "empty" in (empty.reason or "")


def test_parse_keeps_nested_backticks_in_strings():
    parsed = parse_reply('````python\ns = """```"""\n````')
    assert parsed.code == 's = """```"""'


def test_clip_marks_truncation():
    text = clip("a" * 1000, 100, TRUNCATED)
    assert len(text) <= 100 and "truncated" in text
    dropped = int(text.rsplit("truncated ", 1)[1].split()[0])
    assert len(text.split("\n")[0]) == 1000 - dropped  # the count is what was cut off
    assert clip("short", 100) == "short"
    assert clip("a" * 10, 5) == "aaaa…"
    assert clip("abc", 0) == "" and clip("abcdef", 3, "[+{dropped}]") == "abc"  # no room: a bare cut


def test_clip_never_cuts_a_redaction_marker_in_half():
    text = "token <redacted:env API_KEY> and more text"
    assert clip(text, 20, unbroken=("<redacted", ">")) == "token …"
    assert clip(text, 40, unbroken=("<redacted", ">")) == "token <redacted:env API_KEY> and more t…"


def _task(**kwargs) -> RepairTask:
    failure = Failure(
        "KeyError",
        "'Price'",
        lineno=1,
        line='sales["revenue"] = sales["units"] * sales["Price"]',
        assertion=None,
    )
    defaults = dict(code='sales["revenue"] = sales["units"] * sales["Price"]', failures=(failure,))
    defaults.update(kwargs)
    return RepairTask(**defaults)


def test_first_prompt_has_labelled_sections(monkeypatch):
    task = _task(
        checks=("assert total == 10",),
        values=(ValueSummary("sales", "DataFrame", "DataFrame 4 rows × 3 columns"),),
    )
    request = build_request(task, [], Redactor(environ={}))
    text = request.user
    for title in (
        "## The cell",
        "## How it failed in the kernel",
        "## Extra checks",
        "## Variables the cell uses",
        "## Your task",
    ):
        assert title in text, title
    assert "KeyError: 'Price'" in text
    assert "```python" in request.system


def test_later_prompts_carry_candidate_feedback_and_history():
    task = _task()
    history = []
    for number, message in ((1, "first failure"), (2, "second failure")):
        outcome = TrialOutcome("failed", failure=Failure("ValueError", message, where="candidate", lineno=1))
        history.append(Attempt(number, ProviderRequest("s", "u"), code=f"x = {number}", outcome=outcome))
    text = build_request(task, history, Redactor(environ={})).user
    assert "## Earlier attempts" in text and "attempt 1: ValueError" in text
    assert "## Attempt 2 (your latest candidate)" in text and "x = 2" in text
    assert "second failure" in text
    assert "The cell" in text  # the original task is always there


def test_regressed_candidate_is_not_the_base_of_the_next_prompt():
    task = _task()
    good = Attempt(
        1, ProviderRequest("s", "u"), code="x = 1", outcome=TrialOutcome("failed", statements_done=3)
    )
    bad = Attempt(2, ProviderRequest("s", "u"), code="x = 2", outcome=TrialOutcome("failed"), regression=True)
    text = build_request(task, [good, bad], Redactor(environ={})).user
    assert "## Attempt 1 (your latest candidate)" in text
    assert "Attempt 2 was worse" in text


def test_budget_is_respected_and_truncation_marked():
    values = tuple(ValueSummary(f"v{i}", "str", "x" * 290) for i in range(200))
    task = _task(values=values, values_left_out=5)
    text = build_request(task, [], Redactor(environ={}), budget=6000).user
    assert len(text) <= 6000
    assert "truncated" in text


def test_secrets_are_redacted_from_the_whole_prompt(monkeypatch):
    secret = "zz-very-secret-value-42"
    redactor = Redactor(environ={"MY_SERVICE_TOKEN": secret})
    task = _task(code=f'token = "{secret}"\nprint(undefined)')
    text = build_request(task, [], redactor).user
    assert secret not in text
    assert "redacted" in text
