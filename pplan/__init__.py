"""pplan: plan how to cut a transformer across GPUs (tensor, pipeline, data parallel) before the job starts.

The package re-exports the Python API (pplan.api: `recommend`, `explain`, `size`, `compare`, `ArgumentError`)
lazily (PEP 562): `import pplan` loads nothing else; the API loads on first use.

`pplan.recommend`, `pplan.explain` and `pplan.compare` are also modules of the core; importing one would set the
package's attribute of that name to the module. The package's class keeps the API's functions there instead: the
modules are imported by their full name (`from pplan.explain import ...`), never as package attributes.
"""

import sys

TYPE_CHECKING = False  # as typing's, without importing typing (start-up time; type checkers read it as True)
if TYPE_CHECKING:
    from pplan.api import ArgumentError as ArgumentError
    from pplan.api import compare as compare
    from pplan.api import explain as explain
    from pplan.api import recommend as recommend
    from pplan.api import size as size

__version__ = "0.1.0"
__all__ = ["ArgumentError", "__version__", "compare", "explain", "recommend", "size"]

_API = frozenset({"ArgumentError", "compare", "explain", "recommend", "size"})


def __getattr__(name: str) -> object:
    """The API's names, imported from pplan.api when first asked for."""
    if name in _API:
        import importlib

        return getattr(importlib.import_module("pplan.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


class _Package(type(sys)):  # type: ignore[misc]  # the module type, without importing `types`
    """The package's module class: a submodule named as an API function is not bound over it (module docstring)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _API and isinstance(value, type(sys)):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
