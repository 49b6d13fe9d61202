"""One generator module per published schedule family: each builds the per-rank action lists of its schedule."""
