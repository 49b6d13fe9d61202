"""The `pplan explain` line recommend and size print quotes the --model and --hardware a user gave: a path with a
newline, `$(...)` or an escape sequence stays one inert shell word on one line."""

from __future__ import annotations

import shlex

from pplan.cli.commandline import shell_word


def test_a_plain_name_is_left_as_is() -> None:
    assert shell_word("llama3-70b") == "llama3-70b"


def test_shell_syntax_is_one_quoted_word() -> None:
    text = "evil $(touch INJECTED) `id`; rm"
    assert shlex.split(shell_word(text)) == [text]


def test_a_newline_or_escape_stays_on_one_line_without_control_characters() -> None:
    word = shell_word("evil\n$(touch INJECTED)\x1b]0;pwned\x07")
    assert word.isprintable() and "\n" not in word
    assert word.startswith("$'") and word.endswith("'") and "\\n" in word and "\\x1b" in word
