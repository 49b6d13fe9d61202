"""The command lines pplan prints for a plan: `explain_command`, the `pplan explain` line that shows one in full
(recommend's table and document, size's points), spelled from the settings' declarations (pplan.plan.settings)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from pplan.plan.settings import SETTINGS
from pplan.profiles.releases import RELEASE_KNOBS

if TYPE_CHECKING:
    from pplan.plan.records import PlanRequest


def shell_word(text: str) -> str:
    """`text` as one shell word on one line: quoted where the shell would split or expand it, and in `$'...'` with
    every unprintable character escaped (a newline as `\\n`) where it holds one, so a pasted line runs only what
    it shows."""
    if text.isprintable():
        return shlex.quote(text)
    escaped = text.encode("unicode_escape").decode("ascii").replace("'", "\\'")
    return f"$'{escaped}'"


def explain_command(model: str, hardware: str, req: PlanRequest) -> str:
    """The `pplan explain` command line that shows `req` in full: each setting its declaration prints (always, or
    where it differs from its default), in the declared order; with a release named, also every knob a release
    sets (pplan.profiles.releases), so that explain prices what the plan holds, not the release's recipe."""
    args = ["pplan explain", f"--model {shell_word(model)}", f"--hardware {shell_word(hardware)}"]
    args += [
        s.spelled(getattr(req, s.name))
        for s in SETTINGS
        if s.is_printed(req)
        or (req.release is not None and s.name in RELEASE_KNOBS and getattr(req, s.name) is not None)
    ]
    return " ".join(args)
