"""The versioned JSON documents pplan prints, as pydantic models: the data the renderers read and the JSON Schema
`pplan schema` prints."""
