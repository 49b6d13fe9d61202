"""The names `pplan schema NAME` takes, without the documents themselves (importing only nothing): the command's
help lists them from here and pplan.documents.registry keys its classes by them, so `schema --help` and
`schema --list` name the same documents."""

DOCUMENT_NAMES = (
    "explain",
    "recommend",
    "schedule",
    "bench",
    "validate",
    "size",
    "compare",
    "fromlog",
    "bubble",
)
"""Every output document, in the order `pplan schema --list` prints them."""
INPUT_NAMES = ("hardware", "model")
"""Every input profile `pplan schema` describes."""
