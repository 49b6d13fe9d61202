"""Every versioned document pplan prints and every input profile, by the name `pplan schema NAME` takes
(pplan.documents.names: a name without a class here, or a class without a name there, fails at import)."""

from __future__ import annotations

from pydantic import BaseModel

from pplan.documents.base import Out
from pplan.documents.bench import BenchDocument
from pplan.documents.bubble import BubbleDocument
from pplan.documents.compare import CompareDocument
from pplan.documents.explain import ExplainReport
from pplan.documents.fromlog import FromLogReport
from pplan.documents.names import DOCUMENT_NAMES, INPUT_NAMES
from pplan.documents.recommend import RecommendReport
from pplan.documents.schedule import ScheduleDocument
from pplan.documents.size import SizeDocument
from pplan.documents.validate import ValidateDocument
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

_CLASSES: dict[str, type[Out]] = {
    "explain": ExplainReport,
    "recommend": RecommendReport,
    "schedule": ScheduleDocument,
    "bench": BenchDocument,
    "validate": ValidateDocument,
    "size": SizeDocument,
    "fromlog": FromLogReport,
    "compare": CompareDocument,
    "bubble": BubbleDocument,
}
DOCUMENTS: dict[str, type[Out]] = {name: _CLASSES[name] for name in DOCUMENT_NAMES}
"""Every output document, by the name `pplan schema NAME` takes: `pplan explain --json`, `pplan recommend
--format json`, `pplan schedule --json`, `pplan bench --json` (and --report), `pplan validate --json`, `pplan size --format
json`, `pplan compare --format json`, `pplan explain --from-log --json`, `pplan bubble --format json`."""

_INPUTS: dict[str, tuple[type[BaseModel], str]] = {
    "hardware": (HardwareSpec, "a hardware profile (--hardware FILE.toml)"),
    "model": (ModelSpec, "a model profile (--model FILE.toml)"),
}
INPUTS: dict[str, tuple[type[BaseModel], str]] = {name: _INPUTS[name] for name in INPUT_NAMES}
"""Input profiles, by the name `pplan schema NAME` takes, with what they describe."""
