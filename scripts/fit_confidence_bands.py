"""Write pplan/validation/confidence_bands.json: the runs `pplan validate` and `pplan validate --recent` score, with
their errors in and out of sample, the bands per axis and the envelope per hardware (pplan.validation.bands).

    PYTHONPATH=. python scripts/fit_confidence_bands.py [--check]

Run it after anything that changes a prediction or a profile's figures, and paste the table it prints into README
(tests/test_confidence.py checks it); `--check` compares with the shipped file and exits 1 where they differ (tests/test_confidence.py does the same in the acceptance tier). Takes ~20 s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pplan.profiles.catalog import load_hardware, load_model, load_published_runs, load_recent_runs
from pplan.validation.bands import fit_confidence, readme_table

OUT = Path(__file__).resolve().parent.parent / "pplan" / "validation" / "confidence_bands.json"


def fitted() -> dict[str, Any]:
    """The confidence data from scoring every bundled run now (module docstring)."""
    sets = load_published_runs()["sets"]
    return fit_confidence(sets, load_recent_runs(), load_model, load_hardware)


def text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    data = fitted()
    got = text(data)
    if "--check" in argv:
        same = OUT.read_text(encoding="utf-8") == got
        print(
            "confidence_bands.json is current"
            if same
            else "confidence_bands.json is stale: rerun without --check"
        )
        return 0 if same else 1
    OUT.write_text(got, encoding="utf-8")
    print(f"wrote {OUT}; README's table of bands:")
    print(readme_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
