"""Presentation: rich renderables and SVG drawings of the data pplan's core computed and the CLI handed over.

One module per command's output (`explain`, `recommend`, `profiles`, `schedule`, `bench`, `validate`) and the shared
SVG markup (`svg`). Renderers read documents, specs and simulated timelines; they compute nothing of their own
(no simulation, no search, no runs) and print nothing.
"""
