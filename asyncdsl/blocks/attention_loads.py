"""What an attention CTA's producer loads: the query tile once, split between the consumer
warpgroups, then the key and value blocks through a ring, keys and values each on their own
barriers.

    import asyncdsl as ad
    from asyncdsl.blocks.attention_loads import AttentionLoads

    @ad.kernel(block=384)                            # consumers 0 and 1, producer 2
    def summed(q, k, v, out, VALUE_STAGES: ad.constexpr = 2):  # out[w] = q_w + Σ_j (k_j + v_j)
        loads = AttentionLoads(q.dtype, 64, 2, 64, k.dtype, v.dtype, 64, stages=2, value_stages=VALUE_STAGES)
        blocks = k.shape[0] // 64
        with ad.warpgroup_role(2):
            for w in range(2):
                loads.load_query(w, q.at[ad.ds(w * 64, 64), :])
            for j in ad.range(blocks):
                loads.load(j, lambda i: k.at[ad.ds(i * 64, 64), :], lambda i: v.at[ad.ds(i * 64, 64), :])
        with ad.warpgroup_role((0, 1)):              # consumer w: out[w] (its 64 rows)
            me = ad.warpgroup_idx()
            loads.query_landed.wait()
            total = loads.q.at[me][...].astype(ad.float32)
            for j in range(blocks):
                slot, values = loads.slot(j), loads.value_slot(j)
                loads.wait_keys(slot)
                loads.wait_values(values)
                total = total + (loads.k.at[slot][...] + loads.values(values)[...]).astype(ad.float32)
                ad.warpgroup_barrier()               # all have read the slot (attention: a wgmma wait)
                loads.release_keys(slot)
                loads.release_values(values)
            ad.store(out.at[ad.ds(me * 64, 64), :], total)

The query tile `q` holds one part of `q_rows` rows for each of `parts` consumers; both parts
land on `query_landed`.  Block j of keys and values lies in slot `slot(j)` = j % stages; the
consumers' methods take a slot.  (With fewer `value_stages`, block j's values lie in
`value_slot(j)` = j % value_stages.)  The producer waits for a slot's keys to be released before it
copies block j's keys in (from the ring's second round on), then does the same for the values:
a consumer that is done with a block's keys (s = q kᵀ issued and complete) frees them while
p @ v still reads the values of the block before, so the next keys land earlier than one
barrier a slot for both would let them.  A slot is free once all `parts` consumers released it
(`release_*` arrive without a warpgroup-wide sync: call them after the wgmma that read the slot
is known complete).  Everything is in the tensor cores' layout: `q.at[part]` is the A operand
of q @ kᵀ, `keys(slot)` the keys K-major, its B operand (`.T` of the rows), `values(slot)` the
values, the B operand of p @ v.
"""

from __future__ import annotations

from asyncdsl.blocks.kv_ring import KeyValueRing
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.frontend import language as ad


class AttentionLoads(KeyValueRing):
    """A query tile of `parts` × `q_rows` rows and a ring of `stages` slots of `kv_rows` keys
    (`value_stages`, by default as many, of values), all of `d` elements a row.  Make it at the
    kernel's top level."""

    def __init__(self, q_dtype, q_rows: int, parts: int, kv_rows: int, k_dtype, v_dtype, d: int, stages: int,
                 value_stages: int | None = None):
        value_stages = stages if value_stages is None else value_stages
        self.q = ad.smem((parts, q_rows, d), q_dtype, **tensor_core_layout(q_rows))  # [consumer]
        self.k = ad.smem((stages, kv_rows, d), k_dtype, **tensor_core_layout(kv_rows))
        self.v = ad.smem((value_stages, kv_rows, d), v_dtype, **tensor_core_layout(kv_rows))
        self.query_landed = ad.barrier(arrival_count=parts)
        self.block = kv_rows  # keys a slot
        super().__init__(stages, consumers=parts, value_stages=value_stages)

    def load_query(self, part, rows) -> None:
        """For the producer: copy `rows` (a GMEM ref of `q_rows` × `d`) into the query tile's `part`."""
        ad.async_copy(rows, self.q.at[part], barrier=self.query_landed)

    def load(self, j, k_rows, v_rows) -> None:
        """For the producer: copy block j's keys and values into their slots, each once the
        consumers released what the slot held.  `k_rows(j)` and `v_rows(j)` give block j's GMEM
        refs (`kv_rows` × `d`), each traced when its copy is issued, after the wait for the slot."""
        slot = self.slot(j)
        with ad.region("wait k slot"), ad.when(j >= self.stages):
            self.k_empty[slot].wait()
        ad.async_copy(k_rows(j), self.k.at[slot], barrier=self.k_full[slot])
        slot = self.value_slot(j)
        with ad.region("wait v slot"), ad.when(j >= self.value_stages):
            self.v_empty[slot].wait()
        ad.async_copy(v_rows(j), self.v.at[slot], barrier=self.v_full[slot])

    def keys(self, slot):
        """The keys in `slot`, K-major: the B operand of q @ kᵀ."""
        return self.k.at[slot].T

    def scores(self, s, slot, part) -> None:
        """For consumer `part`: issue s = q kᵀ of its query rows over the keys in `slot` (one
        wgmma)."""
        ad.wgmma(s, self.q.at[part], self.keys(slot), accumulate=False)
