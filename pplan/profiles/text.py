"""Free text that arrives from inputs and is printed: the rules names and descriptions obey, and the escaping of
text pplan derives from inputs it does not validate (a config.json's folder, a path, a key).

Every string a profile carries is printed somewhere: in tables (rich, which reads `[...]` as markup), in the
comment lines of launcher settings users paste into shell scripts, in SVG and in JSON. So strings are checked once,
where a profile is validated (`pplan.profiles.fields`), and none can add a line or a terminal escape sequence:

- a name (`NAME_MAX_CHARS`, one line) is letters, digits, spaces and `_ . + - / ( ) , : @ #` only: no `[`/`]`
  (rich markup), no `$`, backtick, quote, backslash, `;`, `&`, `|`, `<`, `>`, `*`, `?`, `!`, `{`/`}` or `~` (shell
  syntax and expansions), no control, format (bidirectional overrides) or separator characters;
- free text (a description or a source, `TEXT_MAX_CHARS`, one line) is any printable character but `[` and `]`.

Text pplan derives from unvalidated input is made safe instead of refused: `safe_name` maps a folder name to a
name, `escaped` writes every unprintable character (and a bracket) as its escape. `shortened` cuts any input
quoted in a message to a readable length.
"""

from __future__ import annotations

import itertools
import re

NAME_MAX_CHARS = 64
"""Longest name (model, hardware, GPU, link): the longest bundled one is 29 characters."""
TEXT_MAX_CHARS = 500
"""Longest description or source: the longest bundled one is under 300 characters."""
QUOTE_MAX_CHARS = 60
"""Longest piece of input quoted in an error message (`shortened`)."""

NAME_PUNCTUATION = " _.+-/(),:@#"
"""The characters a name may hold besides letters and digits."""
_NAME = re.compile(r"[^\W_]|[" + re.escape(NAME_PUNCTUATION) + "]")
_MARKUP = "[]"


def _name_char(char: str) -> bool:
    return char.isprintable() and _NAME.fullmatch(char) is not None


def name_problem(value: str) -> tuple[str, str] | None:
    """Why `value` cannot be a name, and the fix; None when it can."""
    if not value.strip():
        return "is empty", "give a short name such as my-model"
    if len(value) > NAME_MAX_CHARS:
        return (
            f"is {len(value):,} characters long, more than the {NAME_MAX_CHARS} a name may have",
            f"give a name of at most {NAME_MAX_CHARS} characters",
        )
    bad = next((c for c in value if not _name_char(c)), None)
    if bad is not None:
        return (
            f"holds {_describe(bad)}, which a name may not (it is printed in tables and launcher scripts)",
            f"use letters, digits, spaces and {NAME_PUNCTUATION.strip()} only",
        )
    return None


def text_problem(value: str) -> tuple[str, str] | None:
    """Why `value` cannot be a description or a source, and the fix; None when it can."""
    if len(value) > TEXT_MAX_CHARS:
        return (
            f"is {len(value):,} characters long, more than the {TEXT_MAX_CHARS} pplan prints",
            f"shorten it to at most {TEXT_MAX_CHARS} characters",
        )
    bad = next((c for c in value if not c.isprintable() or c in _MARKUP), None)
    if bad is None:
        return None
    if bad in _MARKUP:
        return f"holds {_describe(bad)}, which tables read as markup", "use ( ) instead of [ ]"
    return (
        f"holds {_describe(bad)}, which would change the terminal or the lines it is printed on",
        "keep it to one line of printable characters",
    )


def _describe(char: str) -> str:
    """A character as a message names it: `'$'`, or the escape of an unprintable one (`\\x1b`, `\\u202e`)."""
    if char.isprintable() and char != " ":
        return repr(char)
    return f"the character {char.encode('unicode_escape').decode('ascii')}"


def escaped(text: str, markup: bool = True) -> str:
    """`text` with every unprintable character written as its escape (`\\x1b`, `\\n`, `\\u202e`), and with
    `markup`, `[` and `]` too (`\\x5b`, `\\x5d`): one line that no terminal, table or script reads as anything but
    text."""
    out = []
    for char in text:
        if markup and char in _MARKUP:
            out.append(f"\\x{ord(char):02x}")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(char.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def safe_name(raw: str, default: str = "model") -> str:
    """A name from text that is not one (a folder's name): each run of characters a name may not hold becomes
    `_`, cut to `NAME_MAX_CHARS`; `default` when nothing is left."""
    runs = itertools.groupby(raw, _name_char)
    name = "".join("".join(chars) if ok else "_" for ok, chars in runs)[:NAME_MAX_CHARS].strip()
    return name if name.strip("_ ") else default


def shortened(text: str, limit: int = QUOTE_MAX_CHARS) -> str:
    """`text` for a one-line message: unprintable characters escaped (`escaped`, brackets kept: messages are
    printed as plain text) and cut to `limit` characters, saying how long it was."""
    shown = escaped(text, markup=False)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... ({len(text):,} characters)"
