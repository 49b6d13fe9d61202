"""`python -m pplan` runs the command-line interface."""

from pplan.cli import run

run()
