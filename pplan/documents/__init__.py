"""The versioned JSON documents pplan prints, as pydantic models: the data the renderers read and the JSON Schema
`pplan schema` prints.

One module per document (`explain`, `recommend`, `schedule`, `bench`, `validate`) on the shared closed base
(`base.Out`); `registry.DOCUMENTS` maps each short name to its model, whose `schema` field holds the version
string (`base.version_of`). `registry.INPUTS` names the input profiles whose JSON Schema `pplan schema` also
prints (what `pplan profiles --json` shows; the files are TOML). The registry is a module of its own, imported
by `pplan schema` only: importing one document (as the core does for the explain and recommend models) never
pulls in the other documents' producers.
"""
