"""The one domain exception pplan raises for user mistakes, and its few subclasses.

Every user-facing error names the field at fault and the fix; the CLI turns it into one line and exit code 2.
Internal invariants use `assert`, never these.
"""

from __future__ import annotations


class PplanError(Exception):
    """A user mistake: `field` names the input at fault, `fix` says what to do about it."""

    def __init__(self, field: str, message: str, fix: str = "") -> None:
        self.field = field
        self.message = message
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.field}: {self.message}"
        if self.fix:
            text += f"; {self.fix}"
        return text


class ProfileError(PplanError):
    """A hardware or model profile could not be found or read."""


class ConfigError(PplanError):
    """A parallel configuration is impossible (does not divide, breaks a schedule's rule, ...)."""
