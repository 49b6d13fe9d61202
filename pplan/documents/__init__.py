"""The versioned JSON documents pplan prints, as pydantic models: the shapes the core fills, the renderers read and
`pplan schema` prints as JSON Schema. Shapes only: a document module imports pydantic, its sibling shapes and the
choice types its fields take (`Kind` from pplan.schedules.actions, the bench's `Mode` and `DType`); what fills
each shape lives beside its use case (`pplan.explain`, `pplan.recommend`, `pplan.sizing.document`,
`pplan.validation.document`, `pplan.bench.document`, `pplan.schedules.document_fields`).

One module per document (`explain`, `recommend`, `schedule`, `bench`, `validate`, `size`) on the shared closed
base (`base.Out`); `registry.DOCUMENTS` maps each short name to its model, whose `schema` field holds the version
string (`base.version_of`). `registry.INPUTS` names the input profiles whose JSON Schema `pplan schema` also
prints (what `pplan profiles --json` shows; the files are TOML). The registry is a module of its own, imported
by `pplan schema` only: importing one document (as the core does) never pulls in the others. `names` holds the
names alone (no pydantic), for `schema --help`.
"""
