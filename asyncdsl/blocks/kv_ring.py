"""The consumer's side of a ring of key and value slots: keys and values each on their own full
and empty barriers, so that a consumer done with a block's keys (its scores issued and complete)
frees them while p @ v still reads the values of the block before, and the next keys land
earlier than one barrier a slot for both would let them.  The rings of
`blocks.attention_loads` and `blocks.paged_loads` are this with their own producers."""

from __future__ import annotations

from asyncdsl.frontend import language as ad


class KeyValueRing:
    """`stages` slots of keys and `value_stages` (by default as many) of values, which land on
    `keys`/`values` arrivals each and are freed by `consumers` warpgroups (`release_*` arrive
    without a warpgroup-wide sync: call them after the wgmma that read the slot is known
    complete).  Fewer value slots suit a consumer that frees a block's values well before its
    keys.  The subclass allocates `k` and `v`, (stages, ...) and (value_stages, ...) buffers,
    before calling this."""

    def __init__(self, stages: int, keys: int = 1, values: int = 1, consumers: int = 1,
                 value_stages: int | None = None):
        self.stages = stages
        self.value_stages = stages if value_stages is None else value_stages
        self.k_full = ad.barrier(arrival_count=keys, num=stages)
        self.v_full = ad.barrier(arrival_count=values, num=self.value_stages)
        self.k_empty = ad.barrier(arrival_count=consumers, num=stages)
        self.v_empty = ad.barrier(arrival_count=consumers, num=self.value_stages)

    def slot(self, j):
        """The slot of block j's keys (and of its values, where the ring has as many of each)."""
        return j % self.stages

    def value_slot(self, j):
        """The slot of block j's values."""
        return j % self.value_stages

    def wait_keys(self, slot) -> None:
        """For a consumer: wait until the keys in `slot` have landed."""
        with ad.region("wait k"):
            self.k_full[slot].wait()

    def release_keys(self, *slots) -> None:
        """For a consumer: free the keys of these slots (one or several)."""
        for slot in slots:
            self.k_empty[slot].arrive(sync=False)

    def wait_values(self, slot) -> None:
        """For a consumer: wait until the values in `slot` have landed."""
        with ad.region("wait v"):
            self.v_full[slot].wait()

    def values(self, slot):
        """The values in `slot`: the B operand of p @ v."""
        return self.v.at[slot]

    def release_values(self, *slots) -> None:
        """For a consumer: free the values of these slots (one or several)."""
        for slot in slots:
            self.v_empty[slot].arrive(sync=False)
