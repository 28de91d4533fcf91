"""A hint with code withheld still reads whole and still helps (issue 18, item 9).

The model writes the way real models write hints (55-70 words of prose addressing the student,
naming the cell line) and quotes a fragment of the student's line that is itself the fix:
`lst = new` of the line `lst = new.copy`. The guard withholds it; the sentence around it is
edited so that it reads whole, or goes; when too little is left, the tutor is asked again, told
what was withheld and why, and after that nbrefine's own hint stands in.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from failed_cells import run_failing_cell

import nbrefine
from nbrefine._errors import ProviderError
from nbrefine.engine import RepairTask
from nbrefine.engine.teaching import (
    HintLedger,
    TeachingPolicy,
    guard_reply,
    teach,
    tutor_text,
    withheld_note,
)
from nbrefine.engine.teaching.rewrite import Withheld, reads_whole, take_out, wholeness_faults
from nbrefine.engine.teaching.turn import too_little_left, why_not_shown
from nbrefine.grounding import Redactor
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.sandbox import LiveForkRunner

pytestmark = pytest.mark.timeout(120)

# The student wants a sorted copy of `new`; without brackets `lst` is the method `copy` itself, and
# line 3 fails. `lst = new` in place of line 2 passes the check (the list is sorted): it is withheld.
CELL = "new = [3, 1, 2]\nlst = new.copy\nlst.sort()\nassert lst == [1, 2, 3]\n"
QUOTE = "`lst = new`"
NOTE = withheld_note(1)
ASKED_AGAIN = (
    "Your last hint quoted code that is the fix itself (`lst = new`): describe what to look at "
    "without writing it."
)
GOOD = (
    "Look at line 2 of your cell. Without round brackets after copy, Python does not call the "
    "method, so lst gets the method itself rather than a new list. That is why sorting fails on "
    "line 3. Ask yourself what kind of value lst holds after line 2, and what adding the brackets "
    "would change."
)
# Every sentence quotes the fix, and says to use it: none can stay.
ALL_FIX = (
    f"Try writing {QUOTE} on line 2 and run the cell again. If you use {QUOTE}, the list gets sorted "
    f"on line 3 and your check on line 4 is happy. With {QUOTE} in place, nothing else in the cell "
    "needs to change, and you can move on to the next exercise."
)


def failing(code: str = CELL) -> tuple[RepairTask, LiveForkRunner]:
    """Run ``code`` for real; the task and a runner on the state before it."""
    failure = run_failing_cell(code, {})
    return RepairTask(code=code, failures=(failure,)), LiveForkRunner({}, Redactor(environ={}))


def hint(provider: ScriptedProvider, events: list[str] | None = None, **options: Any):
    task, runner = failing()
    ledger = HintLedger()
    result = teach(
        task,
        provider,
        runner,
        Redactor(environ={}),
        TeachingPolicy(mode="hint", max_hints=3, locked=True),
        ledger=ledger,
        key="cell:lst",
        on_event=None if events is None else lambda kind, payload: events.append(kind),
        **options,
    )
    return result, ledger, task


def assert_whole(text: str) -> None:
    assert reads_whole(text), (wholeness_faults(text), text)


# --------------------------------------------------------------------------- the checker


def test_the_checker_finds_what_the_real_run_left_and_passes_whole_text():
    seen = "You're close!  a list, a number, a function…) that line actually stores."
    faults = wholeness_faults(seen)
    assert not reads_whole(seen)
    assert "doubled spaces" in faults and "a ) that closes nothing" in faults
    assert any("starts in lower case" in f for f in faults)
    for broken in (
        "Look at line 2 (where you copy the list.",
        "Look at `lst and what it holds.",
        "Look at line 2:",
        "Look at line 2, and",
        'Look at "lst on line 2.',
        "Look at 'lst on line 2.",
        "Look at line 2 , then at line 3.",
        "Look at line 2.. Then at line 3.",
        "Look at line 2 () and line 3.",
        "the list on line 2 is the method.",
        "Look at line 2 - ",
    ):
        assert not reads_whole(broken), broken
    for whole in (
        GOOD,
        "Look at line 2: `lst = new.copy` stores the method. The student's list, e.g. the copy, is fine.",
        "Two steps:\n\n- Look at line 4.\n- Compare the values (print them).\n\nYou are close.",
        "For example:\n\n```python\nx = [1]\n```\n\nThat shows it. 'A' is not 'a', and \"aeiou\" is text.",
        "Ask yourself which kind of value (a list, a number, a function…) that line actually stores.",
        "Use str() on the number first; the students' notebooks do too.",
    ):
        assert_whole(whole)


# --------------------------------------------------------------------------- one sentence at a time


@pytest.mark.parametrize(
    ("reply", "left"),
    [
        pytest.param(  # the real run: the quote after a colon, a parenthesis later in the sentence
            "You're close! On line 2 you wrote `lst = new.copy`, but without round brackets Python never "
            f"calls copy, so after that line `lst` is no longer a list: {QUOTE} with `.copy` at the end "
            "hands it the method itself. That is why line 3 fails. Ask yourself which kind of value (a "
            "list, a number, a function…) that line actually stores.",
            "You're close! On line 2 you wrote `lst = new.copy`, but without round brackets Python never "
            "calls copy, so after that line `lst` is no longer a list: the start of that line with `.copy` "
            "at the end hands it the method itself. That is why line 3 fails. Ask yourself which kind of "
            "value (a list, a number, a function…) that line actually stores.",
            id="lst-new-copy",
        ),
        pytest.param(  # the same in quotes, not backticks
            "Look at line 2 of your cell. Right now 'lst = new' is followed by .copy without round brackets, "
            "so lst holds the method itself and not a list. Ask yourself what sort() on line 3 needs.",
            "Look at line 2 of your cell. Right now the start of line 2 is followed by .copy without round "
            "brackets, so lst holds the method itself and not a list. Ask yourself what sort() on line 3 "
            "needs.",
            id="in-quotes",
        ),
        pytest.param(  # a quote inside parentheses: the parentheses go with it
            f"Have a look at line 2, where you make the copy of new (you wrote {QUOTE} and then .copy). In "
            "Python a method only runs when you call it with round brackets; without them you get the "
            "method itself. What does lst hold after line 2?",
            "Have a look at line 2, where you make the copy of new. In Python a method only runs when you "
            "call it with round brackets; without them you get the method itself. What does lst hold after "
            "line 2?",
            id="in-parentheses",
        ),
        pytest.param(  # the corrected line in parentheses: new code, never described, it goes
            "Look closely at line 2 (`lst = new.copy()` is the line you want). A method does nothing until "
            "you call it, and lst.sort() on line 3 needs a list, not a method.",
            "Look closely at line 2. A method does nothing until you call it, and lst.sort() on line 3 "
            "needs a list, not a method.",
            id="fix-in-parentheses",
        ),
        pytest.param(  # mid-sentence after a colon, not at the start of its clause: that clause goes
            f"Line 2 is the place to look: right now {QUOTE} hands lst the method copy, not a new list, "
            "because nothing calls it. Methods only run when round brackets follow their name. Ask "
            "yourself what kind of value lst holds when line 3 tries to sort it.",
            "Line 2 is the place to look. Methods only run when round brackets follow their name. Ask "
            "yourself what kind of value lst holds when line 3 tries to sort it.",
            id="after-a-colon",
        ),
        pytest.param(  # in apposition: the quote goes, the noun stays
            f"The assignment {QUOTE} on line 2 is where the copy goes wrong, because copy is never called. "
            "Think about what round brackets do after a method's name.",
            "The assignment on line 2 is where the copy goes wrong, because copy is never called. Think "
            "about what round brackets do after a method's name.",
            id="apposition",
        ),
        pytest.param(  # proposed as the fix: the sentence goes whole, never half
            "You're close! On line 2, you could simply write 'lst = new', and the cell would pass. But "
            "think about what happens to new when lst is sorted on line 3.",
            "You're close! But think about what happens to new when lst is sorted on line 3.",
            id="proposed",
        ),
    ],
)
def test_a_withheld_quote_leaves_every_sentence_whole(reply: str, left: str):
    task, runner = failing()
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 1, guarded.snippets
    assert "lst = new'" not in guarded.text and QUOTE not in guarded.text
    assert guarded.prose == left
    assert guarded.text == f"{left}\n\n{NOTE}"
    assert_whole(guarded.text)


def test_several_quotes_in_one_sentence_and_a_colon_after_them():
    task, runner = failing()
    reply = (
        f"On line 2 you wrote {QUOTE} and then .copy: that stores the method, so {QUOTE} is the only part "
        "Python runs. Look at what line 3 asks of lst, and compare it with what lst is."
    )
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 2 and QUOTE not in guarded.text
    assert guarded.prose == (
        "On line 2 you wrote the start of that line and then .copy: that stores the method, so the start "
        "of that line is the only part Python runs. Look at what line 3 asks of lst, and compare it with "
        "what lst is."
    )
    assert_whole(guarded.text)


def test_no_stand_in_for_the_students_code_that_passes_on_another_line():
    # `len(xs)` stands on line 3 already; withheld because it passes on line 2. "the end of line 3"
    # in its place would say where to copy the fix from: the sentence goes instead.
    code = (
        "def mean(xs):\n    total = sum(xs) / len(x)\n    n = len(xs)\n    return total\n\n"
        "assert mean([2, 4]) == 3\n"
    )
    task, runner = failing(code)
    reply = "Look at line 2 of your function. On line 2, `len(xs)` is what the division needs. Try it!"
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 1 and "line 3" not in guarded.text
    assert guarded.prose == "Look at line 2 of your function. Try it!"


def test_take_out_on_its_own_keeps_sentences_whole():
    text = "Look at line 2: `a = b` is it. If you write `a = b`, it passes. Well done so far!"
    first, second = text.index("`a = b`"), text.rindex("`a = b`")
    out = take_out(text, [(first, first + 7, False), (second, second + 7, False)])
    assert out == "Look at line 2. Well done so far!" and reads_whole(out)  # no phrase given: no stand-in


def test_a_list_whose_every_item_goes_takes_its_lead_in_with_it():
    text = (
        "Two things to check:\n\n- Write `a = b` on line 2.\n- Then use `c = d` on line 3.\n\nYou are close!"
    )
    spans = [(m.start(), m.end(), False) for m in re.finditer(r"`[^`]+`", text)]
    assert take_out(text, spans) == "You are close!"
    # The sentence a colon leads into goes: the lead-in with it.
    text = "Here is a tip:\n\nWrite `a = b` on line 2. Look at line 3 too."
    start = text.index("`")
    assert take_out(text, [(start, start + 7, False)]) == "Look at line 3 too."
    # A lead-in the model wrote without a list, away from the edit, is its own: it stays.
    text = "Here is a tip:\n\nLook at line 3 too. Write `a = b` on line 2."
    start = text.index("`")
    assert take_out(text, [(start, start + 7, False)]) == "Here is a tip:\n\nLook at line 3 too."


_PROSE = (
    "You're close! On line 2 you wrote `lst = new.copy`, but without round brackets Python never calls "
    "copy, so after that line `lst` is no longer a list. That is why line 3 fails. Ask yourself which "
    "kind of value (a list, a number, a function…) that line actually stores.",
    "Two things to check:\n\n- Look at line 2, where the copy is made.\n- Then look at line 3, which "
    "sorts it.\n\nYou are close, keep going!",
    "Python compares letters exactly, so 'A' never matches anything in \"aeiou\". Make each letter lower "
    "case before you compare it — str has a method for that; e.g. the one on line 2.",
)
_CODE = ("lst = new", "lst = new.copy()", "sorted(new, key=len)", "new[:]", "f(a, b). g()")


def test_wherever_the_withheld_code_stands_what_is_left_reads_whole():
    """Code put at random places in hints that read whole, in every way a reply quotes it."""
    rng = random.Random(18)
    tried = 0
    while tried < 600:
        text = original = rng.choice(_PROSE)
        spots = [m.start() for m in re.finditer(r"(?<=[ \t])\S", text)]
        spans: list[tuple[int, int]] = []
        for spot in sorted(rng.sample(spots, rng.choice((1, 1, 2, 3))), reverse=True):
            code = rng.choice(_CODE)
            quote = rng.choice(("`", "'", '"', "", "(`"))
            shown = f"(`{code}`)" if quote == "(`" else f"{quote}{code}{quote}"
            inside = (1, 1) if quote == "(`" else (0, 0)
            put = shown + rng.choice((" ", " ", ": ", ", ", ". "))
            text = text[:spot] + put + text[spot:]
            spans = [(a + len(put), b + len(put)) for a, b in spans]
            spans.append((spot + inside[0], spot + len(shown) - inside[1]))
        plain = text
        for a, b in sorted(spans, reverse=True):
            plain = plain[:a] + "Foo" + plain[b:]
        if not reads_whole(plain):
            continue  # the code was put where no word would read whole either
        tried += 1
        phrase = rng.choice(("", "the start of line 2", "part of line 2"))
        withheld = [Withheld(a, b, False, phrase if text[a] in "`'\"" else "") for a, b in spans]
        left = take_out(text, withheld)
        assert all(left.count(code) <= original.count(code) for code in _CODE), (text, left)
        assert not left or reads_whole(left), (wholeness_faults(left), text, left)


# --------------------------------------------------------------------------- too little left: ask again


def test_a_hint_whose_every_sentence_quotes_the_fix_is_asked_for_again_and_the_second_is_used():
    provider = ScriptedProvider([ALL_FIX, GOOD])
    events: list[str] = []
    result, ledger, _ = hint(provider, events)
    assert result.status == "hint" and result.text == GOOD and result.withheld == 0
    assert result.requests == 2 and len(provider.requests) == 2
    assert ledger.used("cell:lst") == 1 and result.hints_used == 1  # one hint, asked for twice
    assert result.step.header() == "Hint 1 of 3" and result.next_kind == "hint"
    first, second = (r.user for r in provider.requests)
    assert "not shown" not in first
    assert "## Why your last hint was not shown" in second and ASKED_AGAIN in second
    assert "Give hint 1 of 3" in second  # the same hint, asked for again
    assert second.index("## Why your last hint") < second.index("## Your task")
    assert events == ["teaching_request", "teaching_reply", "guard_done"] * 2


def test_asked_again_and_still_all_fix_nbrefines_own_hint_stands_in_and_reads_whole():
    provider = ScriptedProvider([ALL_FIX, ALL_FIX.replace("Try writing", "Just write"), "never asked"])
    result, ledger, task = hint(provider)
    own = tutor_text(task, mode="hint", level=1)
    assert result.requests == 2 and len(provider.requests) == 2  # max_requests: no third request
    assert result.text == f"{withheld_note(3)} Here is nbrefine's own hint instead: {own}"
    assert "lst = new" not in result.text and ledger.used("cell:lst") == 1
    assert_whole(result.text)


def test_what_is_left_of_a_reply_stays_above_nbrefines_own_hint_when_it_reads_whole():
    short = f"You're close! Try writing {QUOTE} on line 2, and the cell passes."
    provider = ScriptedProvider([short, short])
    result, _, task = hint(provider)
    assert result.requests == 2
    own = tutor_text(task, mode="hint", level=1)
    assert result.text == f"You're close!\n\n{NOTE} Here is nbrefine's own hint instead: {own}"
    assert_whole(result.text)


def test_a_failed_second_request_still_gives_the_hint_and_counts_it_once():
    provider = ScriptedProvider([ALL_FIX, ProviderError("the connection was reset")])
    result, ledger, task = hint(provider)
    assert result.status == "hint" and ledger.used("cell:lst") == 1
    assert result.text.endswith(tutor_text(task, mode="hint", level=1)) and "lst = new" not in result.text
    assert_whole(result.text)


def test_max_requests_one_never_asks_again():
    provider = ScriptedProvider([ALL_FIX, GOOD])
    result, _, _ = hint(provider, max_requests=1)
    assert result.requests == 1 and len(provider.requests) == 1
    assert "Here is nbrefine's own hint instead" in result.text


def test_a_reply_that_is_a_block_of_the_fix_is_not_asked_for_again():
    # A model that answers with the solution in a block has ignored the prompt; nbrefine's own hint.
    provider = ScriptedProvider(
        ["Here you go:\n\n```python\nnew = [3, 1, 2]\nlst = new\nlst.sort()\n```", GOOD]
    )
    result, _, _ = hint(provider)
    assert result.requests == 1 and result.withheld == 1
    assert "Here is nbrefine's own hint instead" in result.text
    assert_whole(result.text)


def test_too_little_left_and_the_note_for_the_next_request():
    task, runner = failing()
    guarded = guard_reply(ALL_FIX, task, runner, timeout_s=5)
    assert guarded.prose == "" and too_little_left(ALL_FIX, guarded)
    assert why_not_shown(guarded).startswith(ASKED_AGAIN)
    explained = why_not_shown(guarded, "explain")
    assert explained.startswith("Your last explanation quoted code that is the fix itself")
    kept = guard_reply(f"{GOOD} Try writing {QUOTE} on line 2.", task, runner, timeout_s=5)
    assert kept.prose == GOOD and not too_little_left(GOOD, kept)
    # Under 40% of the words left: too little, although what is left reads whole.
    long = f"Look at line 2 of your cell. {ALL_FIX} {ALL_FIX}"
    guarded = guard_reply(long, task, runner, timeout_s=5)
    assert guarded.prose == "Look at line 2 of your cell." and too_little_left(long, guarded)


# --------------------------------------------------------------------------- in a real shell


def test_through_refine_in_a_shell_the_hint_asked_for_again_is_shown(shell):
    provider = ScriptedProvider([ALL_FIX, GOOD])
    nbrefine.register_provider("withheld-scripted", lambda settings: provider)
    shell.run_line_magic("refine", "policy --mode hint --max-hints 3")
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", "--provider withheld-scripted", CELL)
    session = nbrefine.last_session()
    assert session.status == "hint" and session.fixed_code is None
    assert session.teaching is not None and session.teaching.text == GOOD
    assert session.teaching.requests == 2 and ASKED_AGAIN in provider.requests[1].user
    assert "lst = new`" not in session.teaching.render()
