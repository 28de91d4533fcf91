"""The offline tutor's canned texts: what an error means, a nudge, and the remedy.

The message decides, not only the error type: ``_RULES`` match the error message (``'NoneType'
object is not subscriptable``, ``unsupported operand type(s) for +: 'int' and 'str'``...) and
fill their texts from it; the other errors get their type's text. Plain words, never code.

May import: the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

_MEANINGS = {
    "NameError": "Python met a name it doesn't know at that point: it never got a value, it is spelled "
    "differently where it was defined, or it is defined in a cell that hasn't run yet.",
    "UnboundLocalError": "a variable was used inside a function before it got a value there. Assigning "
    "to a name anywhere in a function makes it local to the whole function.",
    "KeyError": "a dictionary or a table was asked for a key (or a column) it doesn't have.",
    "AttributeError": "a value was asked for an attribute or method that its type doesn't have.",
    "TypeError": "an operation or a function got a value of a type it can't work with.",
    "ValueError": "a value had the right type but content that doesn't fit, such as the text 'abc' "
    "turned into a number.",
    "IndexError": "a position outside the list (or string) was asked for. Positions start at 0, so "
    "the last one is the length minus 1.",
    "ZeroDivisionError": "a number was divided by zero.",
    "AssertionError": "an assert check was false: the code ran, but a result is not what the check expects.",
    "SyntaxError": "Python couldn't read the code: something is missing or out of place, such as a "
    "bracket, a colon or a quote.",
    "IndentationError": "the spaces at the start of a line don't match the structure Python expects "
    "(the lines of a block after a colon must be indented alike).",
    "ModuleNotFoundError": "an import named a module that isn't installed, or is spelled differently.",
    "ImportError": "an import asked a module for a name it doesn't have.",
    "FileNotFoundError": "there is no file at that path, seen from the folder the notebook runs in.",
    "RecursionError": "a function kept calling itself without reaching a case that stops.",
}
_GENERIC_MEANING = "an operation could not be done with the values it was given."

_NUDGES = {
    "NameError": "check the spelling of each name there, and where each one gets its value.",
    "UnboundLocalError": "check where that variable first gets a value inside the function.",
    "KeyError": "compare the key or column name you use with the ones that really exist. Spelling "
    "and capital letters matter.",
    "AttributeError": "check what type the value before the dot is, and what that type can do.",
    "TypeError": "check the types of the values involved (type() tells you what each one is).",
    "ValueError": "check what the value really contains at that moment.",
    "IndexError": "check which positions exist and which one is asked for.",
    "ZeroDivisionError": "check what you divide by, and when it can be zero.",
    "AssertionError": "work out by hand what the result should be for the check's input, then "
    "follow your code step by step and compare.",
    "SyntaxError": "look for a missing or extra bracket, colon or quote on that line or the one before.",
    "IndentationError": "check the spaces at the start of the lines around it.",
    "ModuleNotFoundError": "check the module's name and whether it is installed.",
    "ImportError": "check the name you import and the module you import it from.",
    "FileNotFoundError": "check the file's name and the folder it is in.",
    "RecursionError": "check that every call gets closer to the case that stops.",
}
_GENERIC_NUDGE = "check what each value on that line holds at that moment."


def nudge(kind: str) -> str:
    """Where to look for an error of ``kind`` (hints 1 and 2)."""
    return _NUDGES.get(kind, _GENERIC_NUDGE)


_NEARLY = {
    "NameError": "If you meant a name that exists, make both spellings match exactly. If the name "
    "should come from another cell, run that cell first; if it is a module, it needs an import.",
    "UnboundLocalError": "Give the variable a value inside the function before you use it, or pass "
    "it in as an argument.",
    "KeyError": "Use the key exactly as it is written in the data, capital letters included. Listing "
    "the keys (or a table's columns) shows you what is there.",
    "AttributeError": "Use a method the type really has; names are case-sensitive. If the value "
    "isn't the type you expected, look at where it got its value.",
    "TypeError": "Compare the type of each value on that line (type() tells you) with what the "
    "operation needs, and look at where the unexpected one got its value.",
    "ValueError": "Clean or convert the value first, or pick an operation that fits what it holds.",
    "IndexError": "Keep the position between 0 and the length minus 1: look at where your range or "
    "index starts and where it stops.",
    "ZeroDivisionError": "Decide what the answer should be when there is nothing to divide by (an "
    "empty list, say) and handle that case before dividing.",
    "AssertionError": "Run your code on the check's input on its own and print the values in between "
    "(a print inside a loop helps). The first value that differs from what you expect shows the step "
    "to change. Usual suspects: capital letters, the first or last item, a range that stops one too "
    "early, dividing by the wrong count.",
    "SyntaxError": "Read the line character by character: every opening bracket or quote needs its "
    "partner, and a line that starts a block (if, for, def, ...) ends with a colon.",
    "IndentationError": "Indent the lines of one block by the same amount (4 spaces is usual).",
    "ModuleNotFoundError": "Install the package (in a cell: %pip install NAME), or fix the spelling "
    "of the import.",
    "ImportError": "Check the module's documentation for the exact name, capital letters included.",
    "FileNotFoundError": "Compare the path with the files that really exist; a path without a folder "
    "is looked up next to the notebook.",
    "RecursionError": "Make sure the function has a case that returns without calling itself, and "
    "that each call moves towards it.",
}
_GENERIC_NEARLY = (
    "Look at the values on that line one at a time (print them) and compare each with what you expected."
)


# ---- remedies that fit the error seen: the message decides, not only the error type


@dataclass(frozen=True)
class Rule:
    """What one kind of error message means and what fixes it. ``{got}``, ``{op}``... come from
    the pattern's named groups (``{a_got}``: with its article); ``extra`` adds a sentence for one
    value of ``got``; ``needs`` names what the operation needs of its value (see ``NEEDS``)."""

    pattern: str
    meaning: str
    remedy: str
    needs: str = ""
    when: Callable[[dict[str, str]], bool] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


NUMBER_TYPES = frozenset({"int", "float", "complex", "int64", "int32", "float64", "float32", "bool"})
_COLLECTIONS = frozenset({"list", "tuple", "dict", "set", "frozenset"})


def _str_and_number(groups: dict[str, str]) -> bool:
    kinds = {groups.get("left", ""), groups.get("right", ""), groups.get("got", "str")}
    return "str" in kinds and bool(kinds & NUMBER_TYPES)


def _collection_involved(groups: dict[str, str]) -> bool:
    return bool({groups.get("left"), groups.get("right")} & _COLLECTIONS)


_NONE_RULE = Rule(
    r"NoneType",
    'a value was None, Python\'s value for "nothing", where a real value was needed.',
    "Find where that value became None: a function without a return statement gives back None, and so "
    "do methods that change a list in place, such as sort(), append() and reverse(). Use the list "
    "itself after such a method, or make your function return its result.",
)
_MIX_MEANING = "text (a str) and a number were combined, and Python never turns one into the other by itself."
_MIX_REMEDY = (
    "Make the values the same kind before combining them: turn a number into text with str(), or text "
    "that holds a number into a number with int() (whole numbers) or float()."
)
_OTHER_OPERANDS = Rule(
    r"unsupported operand type\(s\) for (?P<op>\S+?)=?: '(?P<left>[\w.]+)' and '(?P<right>[\w.]+)'",
    "the operator {op} can't work on {a_left} and {a_right}.",
    "Check which of the two values isn't what you expected, and where it got its value: {op} needs two "
    "values it can combine, such as two numbers.",
)

_RULES: dict[str, tuple[Rule, ...]] = {
    "TypeError": (
        _NONE_RULE,
        Rule(
            r"object of type '(?P<got>[\w.]+)' has no len\(\)",
            "len() was given {a_got}, which has no length: len() counts the items of a collection such "
            "as a list, a string or a dict.",
            "Give len() the collection whose items you want to count, not a single {got}.",
            needs="sized",
        ),
        Rule(
            r"'(?P<got>[\w.]+)' object is not iterable",
            "Python tried to go through {a_got} item by item (in a for loop, or in sum(), list(), sorted() "
            "or unpacking), but {a_got} holds no items.",
            "Go through the collection itself, not a single {got}.",
            needs="iterable",
            extra={"int": " To repeat something a number of times, go through range() of that number."},
        ),
        Rule(
            r"'(?P<got>[\w.]+)' object is not callable",
            "round brackets after a value call it like a function, but {a_got} can't be called.",
            "Either a name that should be a function holds {a_got} here (a variable named like a "
            "function, such as sum, list or max, hides that function until you rename the variable and "
            "restart the kernel), or a * is missing before a bracket: Python never multiplies without it.",
            needs="callable",
        ),
        Rule(
            r"'(?P<got>[\w.]+)' object is not subscriptable",
            "square brackets ask a value for one of its items, but {a_got} has no items.",
            "Use square brackets on the list, the dict or the text itself, not on a single {got}.",
            needs="subscriptable",
            extra={
                "function": " A function is called with round brackets.",
                "method": " A method is called with round brackets.",
                "builtin_function_or_method": " A function is called with round brackets.",
            },
        ),
        Rule(r'can only concatenate str \(not "(?P<got>[\w.]+)"\) to str', _MIX_MEANING, _MIX_REMEDY),
        Rule(_OTHER_OPERANDS.pattern, _MIX_MEANING, _MIX_REMEDY, when=_str_and_number),
        Rule(
            r"'(?P<op>[<>]=?)' not supported between instances of '(?P<left>[\w.]+)' and '(?P<right>[\w.]+)'",
            _MIX_MEANING,
            _MIX_REMEDY,
            when=_str_and_number,
        ),
        Rule(
            r"'(?P<op>[<>]=?)' not supported between instances of '(?P<left>[\w.]+)' and '(?P<right>[\w.]+)'",
            "{op} can't compare {a_left} with {a_right}.",
            "Compare values of the same kind: check where the unexpected one got its value.",
        ),
        Rule(
            r'can only concatenate (?P<have>list|tuple) \(not "(?P<got>[\w.]+)"\) to (?:list|tuple)',
            "+ joins two values of the same kind, and here {a_have} met {a_got}.",
            "To add one item to a list, use its append() method, or put the item in a list of its own "
            "before joining the two.",
        ),
        Rule(
            _OTHER_OPERANDS.pattern,
            _OTHER_OPERANDS.meaning,
            _OTHER_OPERANDS.remedy
            + " To compute with the items of a collection, go through them (or total them with sum()).",
            when=_collection_involved,
        ),
        _OTHER_OPERANDS,
        Rule(
            r"(?P<fn>[\w.<>]+)\(\) (?:takes|missing|got an unexpected keyword|got multiple values)",
            "the call to {fn}() passes a different number of arguments (or different names) than the "
            "definition of {fn}() takes.",
            "Compare the call with the def line of {fn}(): count the arguments it expects and check their "
            "names.",
        ),
        Rule(
            r"can't multiply sequence by non-int of type '(?P<got>[\w.]+)'",
            "a list or a text was multiplied by {a_got}, and repeating a sequence needs a whole number.",
            "If the value is a number written as text, turn it into a number first with float() or int(); "
            "to compute with the items of a list, go through them; to repeat a list or a text, multiply "
            "it by a whole number.",
        ),
        Rule(
            r"'(?P<got>[\w.]+)' object cannot be interpreted as an integer",
            "range() and positions need a whole number (an int), and they got {a_got}.",
            "Turn the value into a whole number with int() first.",
            extra={"float": " Dividing with // also gives a whole number."},
        ),
        Rule(
            r"unhashable type: '(?P<got>[\w.]+)'",
            "dictionary keys and set members must be values that never change (numbers, text, tuples), "
            "and {a_got} can change.",
            "Use a value that can't change as the key: a tuple instead of a list, for example, or the "
            "text or number that identifies the item.",
        ),
        Rule(
            r"(?P<have>string|list|tuple) indices must be integers",
            "positions in a {have} are whole numbers, and the position given was not one.",
            "Use a whole-number position (int() converts text that holds one); a name in square brackets "
            "works only on a dict, so check whether the value is the dict you expected.",
        ),
        Rule(
            r"sequence item \d+: expected str instance, (?P<got>[\w.]+) found",
            "join() only joins text, and one of the items was {a_got}.",
            "Turn every item into text before joining them (str() does that for one item).",
        ),
    ),
    "ValueError": (
        Rule(
            r"(?:too many|not enough) values to unpack",
            "unpacking gives each name on the left of = one value from the right, and the numbers "
            "don't match.",
            "Make the number of names on the left match the number of items on the right: print the value "
            "you unpack to count its items.",
        ),
        Rule(
            r"invalid literal for int\(\)|could not convert string to float",
            "the text given to be turned into a number doesn't hold a number Python can read.",
            "Check the text before you convert it (print it to see what it holds): int() reads whole "
            "numbers only (text like '3.5' is read by float instead), and spaces or commas must go first.",
        ),
        Rule(
            r"math domain error",
            "a math function got a value outside the ones it accepts, such as the square root or the "
            "logarithm of a negative number.",
            "Check the value before the call: where can it become negative (or zero)?",
        ),
    ),
    "IndexError": (
        Rule(
            r"empty",
            "an item was taken from a list (or a collection) that was empty at that moment.",
            "Check that the list gets its items before this line, or handle the empty case first.",
        ),
    ),
    "AttributeError": (
        _NONE_RULE,
        Rule(
            r"module '(?P<module>[\w.]+)' has no attribute '(?P<attr>\w+)'",
            "the module {module} has nothing called {attr}.",
            "Check the name in the module's documentation, capital letters included.",
        ),
        Rule(
            r"'(?P<got>[\w.]+)' object has no attribute '(?P<attr>\w+)'",
            "{a_got} was asked for {attr}, which a {got} doesn't have.",
            "Use a method {a_got} really has (names are case-sensitive); if the value isn't the type you "
            "expected, look at where it got its value.",
        ),
    ),
}

#: What an operation needs of a value: the attribute that shows it, and the words for it.
NEEDS = {
    "sized": ("__len__", "a collection"),
    "iterable": ("__iter__", "a collection"),
    "subscriptable": ("__getitem__", "a collection"),
    "callable": ("__call__", "a function"),
}
#: Calls that go through their argument item by item.
ITERATING_CALLS = frozenset(
    {"sum", "list", "sorted", "set", "tuple", "enumerate", "zip", "max", "min", "any", "all"}
)


class Fields(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return ""


def rule_for(kind: str, message: str) -> tuple[Rule, Fields] | None:
    """The first rule of ``kind`` whose pattern matches the message (and whose ``when`` holds)."""
    for rule in _RULES.get(kind, ()):
        match = re.search(rule.pattern, message)
        if match is None:
            continue
        groups = {k: v for k, v in match.groupdict().items() if v}
        if rule.when is not None and not rule.when(groups):
            continue
        fields = Fields(groups)
        fields.update({f"a_{k}": article(v) for k, v in groups.items()})
        return rule, fields
    return None


def meaning(kind: str, message: str) -> str:
    found = rule_for(kind, message)
    if found is None:
        return _MEANINGS.get(kind, _GENERIC_MEANING)
    rule, fields = found
    return rule.meaning.format_map(fields)


def remedy(kind: str, message: str) -> str:
    found = rule_for(kind, message)
    if found is None:
        return _NEARLY.get(kind, _GENERIC_NEARLY)
    rule, fields = found
    return rule.remedy.format_map(fields) + rule.extra.get(fields["got"], "")


def article(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def kind_of(error_type: str) -> str:
    if error_type in _MEANINGS:
        return error_type
    if error_type.endswith("IndentationError") or error_type == "TabError":
        return "IndentationError"
    return error_type
