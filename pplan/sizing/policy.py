"""What a sizing sweep tries: the GPU counts and the global batch at each, with their defaults and bounds. Pure
arithmetic, no search: the command line's options read these without loading the core.

GPU counts (`default_counts`): whole nodes, the powers of two times the node size and the 1.5× counts between them
(8, 12, 16, 24, ... on 8-GPU nodes), within the range asked (`pplan size` caps it at `pplan.recommend.MAX_GPUS`).

Batch policy (`BatchPolicy`): a fixed global batch in tokens at every count, or one that grows in proportion to the
GPU count from the smallest count's batch up to a ceiling (`max_tokens`); either is a whole number of sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

STOP_EFFICIENCY = 0.5
"""A hardware's sweep stops after the first count whose tokens/s per GPU is below half the best per-GPU figure."""
DEFAULT_BATCH_TOKENS = 4 * 2**20
"""4M tokens per step (Llama 2's global batch, Touvron et al. 2023, arXiv 2307.09288, §2.2)."""


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """The global batch in tokens at each GPU count (module docstring)."""

    tokens: int = DEFAULT_BATCH_TOKENS
    """Fixed: at every count; growing: at the sweep's smallest count."""
    max_tokens: int | None = None
    """Growing: the ceiling; None: fixed."""

    def sequences(self, gpus: int, smallest: int, seq_len: int) -> int:
        """Sequences per step at `gpus` GPUs (the tokens divided by `seq_len`, rounded down, at least 1)."""
        tokens = self.tokens
        if self.max_tokens is not None:
            tokens = min(self.max_tokens, self.tokens * gpus // smallest)
        return max(1, tokens // seq_len)

    def describe(self, seq_len: int) -> str:
        """The policy in words, for the assumptions."""
        if self.max_tokens is None:
            return (
                f"fixed global batch: {self.tokens:,} tokens ({self.tokens // seq_len:,} sequences of {seq_len:,}) "
                "at every GPU count"
            )
        return (
            f"growing global batch: {self.tokens:,} tokens at the smallest count, in proportion to the GPUs up to "
            f"{self.max_tokens:,} (whole sequences of {seq_len:,})"
        )


def default_counts(gpus_per_node: int, low: int, high: int) -> tuple[int, ...]:
    """Whole nodes: node × 2^k and node × 3 · 2^(k−1) between, within [low, high] (module docstring)."""
    out: set[int] = set()
    k = 0
    while gpus_per_node * 2**k * 3 // 4 <= high:
        base = gpus_per_node * 2**k
        out.add(base)
        if k >= 1:
            out.add(base * 3 // 4)  # 1.5 × the power of two below
        k += 1
    return tuple(sorted(n for n in out if low <= n <= high and n % gpus_per_node == 0))
