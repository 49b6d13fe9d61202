"""Cleaning a pasted log before it is read: line ends (CRLF, lone CR), ANSI colour codes, the prefixes launchers and
loggers put before each line (rank tags such as `[rank0]:`, `0: `, `[1,0]<stdout>:`, `[default3]:`; timestamps;
torchtitan's and NeMo's logger heads), and wrapped lines (a `|`-separated record continued on the next line).

Each cleaned line keeps the rank and the time its prefixes gave, so readers can prefer rank 0 and time steps from
the stamps. Pure text: no files.
"""

from __future__ import annotations

import datetime
import itertools
import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_STAMP = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_LEVELS = "INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL"
_RANK_TAGS = (
    re.compile(r"^\s*\[(?:rank|Rank|RANK)\s*(\d+)\]\s*:\s?"),  # torchrun's --tee / local_ranks_filter
    re.compile(r"^\s*\[default(\d+)\]\s*:\s?"),  # torchrun -r / --tee older spelling
    re.compile(r"^\s*\[\d+,(\d+)\]<std(?:out|err)>\s*:\s?"),  # Open MPI --tag-output
    re.compile(r"^\s*(\d{1,5})\s*:\s+(?=\S)"),  # srun --label
    re.compile(r"^\s*rank\s*(\d+)\s*:\s?", re.IGNORECASE),
)
_HOST = re.compile(r"^\s*(?!(?:fp|bf|int)\d)[A-Za-z][A-Za-z.-]*\d+:\s+(?=\S)")
"""A pdsh / DeepSpeed launcher host prefix (`node-12: `, `gpu001: `, `node7: `): a name without underscores ending
in digits, so YAML keys such as `fp8:`, `bf16:` or `adam_beta1:` are not taken for hosts."""
HARD_WRAP_MIN = 40
"""A record line at least this long that ends mid-field was cut by a terminal: its continuation is joined without
a space."""
_STAMPS = (
    re.compile(r"^\s*\[(" + _STAMP + r")\]\s*"),  # [2024-05-01 12:00:00]
    re.compile(r"^\s*\[titan\]\s*(" + _STAMP + r")\s*-\s*[\w.]+\s*-\s*[A-Z]+\s*-\s?"),  # torchtitan logger
    re.compile(r"^\s*(" + _STAMP + r")\s*-\s*[\w.]+\s*-\s*[A-Z]+\s*-\s?"),  # Python logging's default head
    re.compile(r"^\s*(" + _STAMP + r")\s*[-|]\s*(?:" + _LEVELS + r")\s*[-|:]\s?"),  # `asctime - levelname - `
    re.compile(
        r"^\s*\[(?:" + _LEVELS + r")\]\s*(?:\[[\w.:/\- ]+\]\s*)*()"
    ),  # `[INFO] [module:12] ` after a stamp
    re.compile(r"^\s*\[NeMo [A-Z] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\]\s*"),  # NeMo's logger
    re.compile(r"^\s*(" + _STAMP + r")\s*(?:\|\s*)?(?:[A-Z]+\s*(?:\|\s*)?)?(?:[\w.]+:\d+\s*(?:-|\|)\s*)?"),
    re.compile(r"^\s*(?:INFO|WARNING|DEBUG):[\w.]+:\s?()"),
)
_MEGATRON_RECORD = re.compile(r"\biteration\s+\d+\s*(?:/\s*\d+\s*)?\||iterations?\)\s*memory\s*\(\w+\)\s*\|")
_OWN_LINE = re.compile(r"^\s*[\[>]|^\s*\w+ \.{3}|^\s*\(after \d+ iterations|^\s*-{6}")
"""A line that is a log line of its own (a bracketed tag, an arguments-block line, a memory line), never a
continuation."""
_RECORD_START = re.compile(r"\biteration\s+\d+\s*[/|]|\bstep:\s*\d+|Training epoch \d+")
_TITAN_STEP = re.compile(r"\bstep:\s*\d+\s")
_TITAN_END = re.compile(r"mfu:\s*[\d.]+%\s*$")
"""torchtitan's step line ends with its MFU field; one that does not, followed by a line with no logger prefix of
its own, was cut by a terminal."""


@dataclass(frozen=True)
class Line:
    """One cleaned line: its text, its 1-based number among the cleaned lines, the rank and time its prefixes gave."""

    text: str
    number: int
    rank: int | None = None
    time_s: float | None = None


def _time(stamp: str) -> float | None:
    text = stamp.replace(",", ".").replace("T", " ").rstrip("Z")
    text = re.sub(r"[+-]\d\d:?\d\d$", "", text)
    try:
        return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp()
    except ValueError:
        return None


def _strip(text: str) -> tuple[str, int | None, float | None]:
    rank: int | None = None
    time_s: float | None = None
    for _ in range(6):  # prefixes stack: `0: [rank0]:[titan] 2025-… - root - INFO - `
        before = text
        host = _HOST.match(text)
        if host:
            text = text[host.end() :]
        for pattern in _RANK_TAGS:
            m = pattern.match(text)
            if m:
                rank = int(m.group(1)) if rank is None else rank
                text = text[m.end() :]
        for pattern in _STAMPS:
            m = pattern.match(text)
            if m and m.end() > 0:
                if m.group(1) and time_s is None:
                    time_s = _time(m.group(1))
                text = text[m.end() :]
                break
        if text == before:
            break
    return text, rank, time_s


def clean_lines(raw: str) -> list[Line]:
    """The cleaned lines of `raw` (module docstring); wrapped `|` records are joined onto their first line."""
    text = ANSI.sub("", raw.replace("\r\n", "\n").replace("\x00", ""))
    out: list[Line] = []
    pieces: list[str] = []
    redrawn: set[int] = set()  # pieces after a lone carriage return: a progress bar redrawn, never a cut
    for line in text.split("\n"):
        parts = line.split("\r")
        redrawn.update(range(len(pieces) + 1, len(pieces) + len(parts)))
        pieces += parts
    width = _wrap_width(pieces, redrawn)
    previous = ""
    for index, piece in enumerate(pieces):
        body, rank, time_s = _strip(piece)
        if not body.strip():
            previous = piece
            continue
        cut = (
            width is not None
            and index not in redrawn
            and len(previous) >= width - TRAILING_SPACE_LOST
            and (_may_continue(body) or _mid_word(previous, body))
        )
        previous = piece
        if out and body == piece and (cut or _titan_cut(out[-1].text, body)):
            last = out[-1]
            out[-1] = Line(last.text + body, last.number, last.rank, last.time_s)
            continue
        if out and _continues(out[-1].text, body):
            last = out[-1]
            hard = _hard_wrapped(last.text, body)
            joined = last.text + body if hard else last.text.rstrip() + " " + body.strip()
            out[-1] = Line(joined, last.number, last.rank, last.time_s)
            continue
        out.append(Line(body, len(out) + 1, rank, time_s))
    return out


TRAILING_SPACE_LOST = 2
"""A terminal's copy may drop the spaces a cut line ended with: a piece this much shorter than the width still
counts as cut."""
MIN_WRAPPED = 1


def _wrap_width(pieces: list[str], redrawn: set[int]) -> int | None:
    """The width a terminal cut the log's lines at, or None. Every line longer than the terminal is cut into pieces
    of its width, so the width is the longest piece's length, where at least `MIN_WRAPPED` pieces that long are
    followed by a piece with no prefix that is no record or log line of its own (the rest of a cut line)."""
    if not pieces:
        return None
    width = max(len(p) for p in pieces)
    if width < HARD_WRAP_MIN:
        return None
    seen = 0
    for index, (piece, after) in enumerate(itertools.pairwise(pieces)):
        if index + 1 not in redrawn and len(piece) >= width - TRAILING_SPACE_LOST and after.strip():
            body = _strip(after)[0]
            seen += body == after and _may_continue(body)
    return width if seen >= MIN_WRAPPED else None


_OWN_AFTER_CUT = re.compile(
    r"^\s*\[(?:[Rr]ank\s*\d|NeMo|default|titan|\d{4}-)|^\s*\[[a-z_.]+\]\s*$|^\s*>|^\s*\w+ \.{3}|^\s*Epoch \d+:"
    r"|^\s*\(after \d+ iterations|^\s*-{6}"
)
"""A log line of its own, told from the rest of a cut line (which may start with a bracket: `[8]`): a bracketed
tag, a TOML section, an arguments-block line, a memory line, a rule."""


def _may_continue(body: str) -> bool:
    """`body` may be the rest of a cut line: not a record or a log line of its own."""
    return not (_RECORD_START.search(body[:60]) or _OWN_AFTER_CUT.match(body))


_WHOLE_RECORD = re.compile(
    r"^\s*(?:Training epoch \d+|iteration\s+\d+\s*[/|]|step:\s*\d+\s+loss:|Epoch \d+:)"
)
"""A line that starts a record of its own, even right after a word: never the rest of a cut one."""


def _mid_word(previous: str, body: str) -> bool:
    """The cut fell inside a word (`global_` | `step: 10 | …`): unless `body` starts a whole record, it is the word's
    rest."""
    return bool(re.match(r"\w", body) and re.search(r"\w$", previous)) and not _WHOLE_RECORD.match(body)


def _titan_cut(previous: str, body: str) -> bool:
    """`previous`, a torchtitan step line, was cut by a terminal before its last field and `body` (a line with no
    prefix) is the rest."""
    return (
        bool(_TITAN_STEP.search(previous))
        and not _TITAN_END.search(previous)
        and not _RECORD_START.search(body)
    )


def _continues(previous: str, body: str) -> bool:
    """`body` continues the record on `previous`: the record ends in a `|` separator or `body` starts with one,
    and `body` does not start a record of its own."""
    if _RECORD_START.search(body[:60]) or _OWN_LINE.match(body):
        return False
    if not (_RECORD_START.search(previous) or _MEGATRON_RECORD.search(previous)):
        return False
    if previous.rstrip().endswith("|") or body.lstrip().startswith("|"):
        return True
    return _hard_wrapped(previous, body)


def _hard_wrapped(previous: str, body: str) -> bool:
    """`previous`, a Megatron iteration record (which always ends in `|`), was cut by a terminal: long, not ending
    in its separator, and `body` not a log line of its own (no record start, no `[`, no arguments-block dots)."""
    tail = previous.rstrip()
    if re.search(r"max reserved:\s*[\d.]+$", tail):  # a memory line ends with its last field
        return False
    return len(tail) >= HARD_WRAP_MIN and not tail.endswith("|") and bool(_MEGATRON_RECORD.search(previous))
