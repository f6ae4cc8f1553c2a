"""`LaunchShape`: what a kernel body may assume about how it is launched (block, cluster, target,
devices), which the tracer holds while the body runs (`asyncdsl.cluster_shape()`, warpgroup roles).

A plain record, without IR: the decorator makes one for every kernel (`jit/options.py`), and
`import asyncdsl` never loads the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncdsl.hw.options import Arch


@dataclass(frozen=True)
class LaunchShape:
    """What a kernel body may assume about how it is launched."""

    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    arch: Arch = Arch.SM_90A
    devices: int = 1  # how many devices run it at once (`asyncdsl.num_devices()`)
    ctas_per_sm: int = 1  # CTAs a multiprocessor holds at once: they share its registers

    @property
    def num_warpgroups(self) -> int:
        return self.block[0] * self.block[1] * self.block[2] // 128
