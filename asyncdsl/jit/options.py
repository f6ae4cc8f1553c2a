"""What `@asyncdsl.kernel(...)` fixes for every specialisation of a kernel, checked once when the
kernel is declared: the PTX entry's name, the launch shape (block, cluster, target, the CTAs a
multiprocessor is to hold at once), where TMA descriptors travel, and how many region events a
profiled warpgroup can record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from asyncdsl.errors import ArgumentError, SourceLocation, is_int
from asyncdsl.frontend.launch_shape import LaunchShape
from asyncdsl.frontend.options import option
from asyncdsl.hw.limits import MAX_CTAS_PER_SM, MAX_THREADS_PER_SM
from asyncdsl.hw.options import DESCRIPTOR_MODES, Arch
from asyncdsl.hw.profile import MAX_EVENTS_PER_WARPGROUP
from asyncdsl.jit.grid import dims3


@dataclass(frozen=True)
class KernelOptions:
    """A kernel's compile options (see the module docstring)."""

    name: str
    launch: LaunchShape
    descriptor_mode: str
    profile_events: int

    @staticmethod
    def checked(
        function_name: str, name: Any, block: Any, cluster: Any, arch: Any, descriptors: Any,
        profile_events: Any, definition: SourceLocation | None, ctas_per_sm: Any = 1,
    ) -> KernelOptions:
        """The options of kernel `function_name`, each refused at its `definition` line when the
        hardware or the compiler cannot take it."""
        if name is not None and not isinstance(name, str):
            raise ArgumentError(f"kernel {function_name}: name must be a str (the PTX entry's name), "
                                f"got {name!r}", definition)
        block = dims3(block, "block", definition)
        threads = block[0] * block[1] * block[2]
        if block[1:] != (1, 1) or threads % 128 or not 128 <= threads <= 512:
            raise ArgumentError(
                f"block must be 128, 256, 384 or 512 threads along x (whole warpgroups), got {block}",
                definition,
            )
        target = option(Arch, arch, "arch", ArgumentError, definition)
        most = min(MAX_CTAS_PER_SM, MAX_THREADS_PER_SM // threads)
        if not is_int(ctas_per_sm) or not 1 <= ctas_per_sm <= most:
            raise ArgumentError(
                f"ctas_per_sm (the CTAs a multiprocessor is to hold at once) must be an int in 1 .. {most} "
                f"for {threads}-thread CTAs (a multiprocessor holds {MAX_THREADS_PER_SM} threads), "
                f"got {ctas_per_sm!r}", definition)
        launch = LaunchShape(block, dims3(cluster, "cluster", definition), target, ctas_per_sm=ctas_per_sm)
        if descriptors not in DESCRIPTOR_MODES:
            raise ArgumentError(f"descriptors must be one of {DESCRIPTOR_MODES}, got {descriptors!r}",
                                definition)
        if not is_int(profile_events) or not 1 <= profile_events <= MAX_EVENTS_PER_WARPGROUP:
            raise ArgumentError(
                f"profile_events (region events each warpgroup can record when profiled) must be an int in "
                f"1 .. {MAX_EVENTS_PER_WARPGROUP}, got {profile_events!r}",
                definition,
            )
        cluster_size = launch.cluster[0] * launch.cluster[1] * launch.cluster[2]
        if cluster_size > 16:
            raise ArgumentError(f"a cluster holds at most 16 CTAs, got {launch.cluster}", definition)
        return KernelOptions(_ptx_identifier(name or function_name), launch, str(descriptors), profile_events)


def _ptx_identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)
