"""Cleaning a pasted log before it is read: line ends (CRLF, lone CR), ANSI colour codes, the prefixes launchers and
loggers put before each line (rank tags such as `[rank0]:`, `0: `, `[1,0]<stdout>:`, `[default3]:`; timestamps;
torchtitan's and NeMo's logger heads), and wrapped lines (a `|`-separated record continued on the next line).

Each cleaned line keeps the rank and the time its prefixes gave, so readers can prefer rank 0 and time steps from
the stamps. Pure text: no files.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_STAMP = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
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
    re.compile(r"^\s*\[NeMo [A-Z] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\]\s*"),  # NeMo's logger
    re.compile(r"^\s*(" + _STAMP + r")\s*(?:\|\s*)?(?:[A-Z]+\s*(?:\|\s*)?)?(?:[\w.]+:\d+\s*(?:-|\|)\s*)?"),
    re.compile(r"^\s*(?:INFO|WARNING|DEBUG):[\w.]+:\s?()"),
)
_MEGATRON_RECORD = re.compile(r"\biteration\s+\d+\s*(?:/\s*\d+\s*)?\||iterations?\)\s*memory\s*\(\w+\)\s*\|")
_OWN_LINE = re.compile(r"^\s*[\[>]|^\s*\w+ \.{3}|^\s*\(after \d+ iterations|^\s*-{6}")
"""A line that is a log line of its own (a bracketed tag, an arguments-block line, a memory line), never a
continuation."""
_RECORD_START = re.compile(r"\biteration\s+\d+\s*[/|]|\bstep:\s*\d+|Training epoch \d+")


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
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = ANSI.sub("", text)
    out: list[Line] = []
    for piece in text.split("\n"):
        body, rank, time_s = _strip(piece)
        if not body.strip():
            continue
        if out and _continues(out[-1].text, body):
            last = out[-1]
            hard = _hard_wrapped(last.text, body)
            joined = last.text + body if hard else last.text.rstrip() + " " + body.strip()
            out[-1] = Line(joined, last.number, last.rank, last.time_s)
            continue
        out.append(Line(body, len(out) + 1, rank, time_s))
    return out


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
