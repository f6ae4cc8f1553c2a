"""Autotuning: one call that stands for several kernels or constexpr settings, tries each on the
first call for each argument layout, times them on the GPU and runs the fastest from then on.

    tuned = ad.autotune([ad.Choice(matmul, BN=64, BK=128, STAGES=4),
                         ad.Choice(matmul_narrow, BK=128, STAGES=6),
                         ad.Choice(matmul_2cta)])
    tuned(a, b, c, CTAS=132)        # first call for these shapes: tries each, keeps the fastest
    tuned.chosen(a, b, c, CTAS=132) # the Choice it runs for arguments like these
    tuned.timings                   # per key: each choice's milliseconds, or why it did not run
    ad.warmup(tuned.specializations(a, b, c, CTAS=132))   # compile every choice ahead

A call's key is what a kernel is specialised on: each array argument's shape and dtype, every
other argument's value (`key=`, a function of the call's arguments returning something hashable,
replaces it).  A choice that does not compile for the arguments (a trace error, shared memory it
cannot have) is left out and its reason kept; the others run `warmup` times, then `repeat` times
each between CUDA events after an L2 flush (`runtime.timing.device_milliseconds`), the median
counting.  Arguments the kernels update in place (`c += a @ b`) are named in `restore`: they are
saved before the trials and put back after each choice's, so the call that follows the tuning
sees them as they were.  In the interpreter, or without a GPU, nothing is timed: the first choice
that compiles runs.

A tuning on the GPU is filed on disk (`jit/tunings.py`) under the choices' names and code, the
call's key and the device's model: a later process, or another rank of the job, making the same
call on such a device takes the choice from there without compiling or timing anything.  A key
whose text differs between processes (a `key=` function returning objects that print their
address) is tuned in every process, as is every call under ASYNCDSL_KERNEL_CACHE=0.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from asyncdsl import runtime
from asyncdsl.config import knobs
from asyncdsl.errors import ArgumentError, AsyncDSLError, is_int, user_location
from asyncdsl.jit.kernel import Kernel
from asyncdsl.jit.code_digest import keyable, value_text
from asyncdsl.jit.tunings import TUNINGS_FORMAT, TuningFiles, Tunings
from asyncdsl.jit.warmup import Specialization
from asyncdsl.kernel_binary import constexpr_key
from asyncdsl.runtime.buffers import copy_on_stream, empty
from asyncdsl.runtime.streams import current_stream_source, launch_stream
from asyncdsl.runtime.timing import device_milliseconds


class Choice:
    """A kernel with some of its constexprs fixed: one candidate of an autotuned call."""

    __slots__ = ("constexprs", "kernel")

    def __init__(self, kernel: Kernel, **constexprs: Any):
        if not isinstance(kernel, Kernel):
            raise ArgumentError(f"asyncdsl.Choice takes an @asyncdsl.kernel, got {kernel!r}", user_location())
        self.kernel = kernel
        self.constexprs = constexprs

    @property
    def name(self) -> str:
        settings = ", ".join(f"{name}={value!r}" for name, value in self.constexprs.items())
        return f"{self.kernel.name}({settings})"  # the kernel's own name: one function may make several

    def __repr__(self) -> str:
        return f"Choice({self.name})"

    def arguments(self, kwargs: dict) -> dict:
        """The call's keyword arguments with this choice's constexprs; naming one of them twice is
        an error (which value was meant?)."""
        clash = sorted(set(kwargs) & set(self.constexprs))
        if clash:
            raise ArgumentError(f"{self.name} fixes {', '.join(clash)}; the call may not pass "
                                f"{'it' if len(clash) == 1 else 'them'} too", user_location())
        return {**kwargs, **self.constexprs}

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        self.kernel(*args, stream=stream, **self.arguments(kwargs))


class Autotuned:
    """The call `autotune` returns (see the module's docstring)."""

    def __init__(self, choices: Iterable[Choice], key: Callable[..., Any] | None = None,
                 restore: Sequence[str] = (), warmup: int = 2, repeat: int = 10):
        self.choices = tuple(choices)
        if not self.choices or not all(isinstance(choice, Choice) for choice in self.choices):
            raise ArgumentError(f"asyncdsl.autotune takes a non-empty list of asyncdsl.Choice, "
                                f"got {choices!r}", user_location())
        if isinstance(restore, str) or not all(isinstance(name, str) for name in restore):
            raise ArgumentError(f"restore names the arguments to put back after each trial: a tuple of "
                                f"names, got {restore!r}", user_location())
        for name, value, least in (("warmup", warmup, 0), ("repeat", repeat, 1)):
            if not is_int(value) or value < least:
                raise ArgumentError(f"asyncdsl.autotune: {name} must be an int >= {least}, got {value!r}",
                                    user_location())
        names = [choice.name for choice in self.choices]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ArgumentError(f"asyncdsl.autotune: choices are told apart by name (their timings too), and "
                                f"{', '.join(twice)} is given more than once", user_location())
        self._by_name = dict(zip(names, self.choices))
        self.key = key
        self.restore = tuple(restore)
        self.warmup, self.repeat = warmup, repeat
        self.tunings = Tunings()

    @property
    def timings(self) -> dict[Any, dict[str, float | str]]:
        """Per tuning key, each choice's milliseconds or why it did not run."""
        return self.tunings.timings

    def __repr__(self) -> str:
        return f"<asyncdsl.autotune of {len(self.choices)} choices, {len(self.tunings)} keys tuned>"

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        self.chosen(*args, stream=stream, **kwargs)(*args, stream=stream, **kwargs)

    def chosen(self, *args: Any, stream: Any = None, **kwargs: Any) -> Choice:
        """The choice calls with arguments like these run; the first such call tunes."""
        key = self._key(args, kwargs)
        name = self.tunings.chosen(key)
        if name is None:
            name = self._tune(key, args, kwargs, stream).name
            self.tunings.choose(key, name)
            if knobs.print_autotuning:
                print(self.tunings.report(key), file=sys.stderr)
        return self._by_name[name]

    def specializations(self, *args: Any, **kwargs: Any) -> list[Specialization]:
        """Every choice's kernel for arguments like these (arrays or `ArraySpec`s, as a call takes
        them), for `asyncdsl.warmup`: what a tuning of such a call compiles."""
        return [choice.kernel.specialization(*args, **choice.arguments(kwargs)) for choice in self.choices]

    def _key(self, args: tuple, kwargs: dict) -> Any:
        """The tuning key of a call: `key(*args, **kwargs)`, checked, or the arguments' layout."""
        if self.key is None:
            return _layout_key(args, kwargs)
        try:
            key = self.key(*args, **kwargs)
            hash(key)
        except Exception as error:  # noqa: BLE001 - the user's function: report it at the call
            raise ArgumentError("asyncdsl.autotune: the key function must return a hashable value for the "
                                f"call's arguments; it gave {type(error).__name__}: {error}",
                                user_location()) from error
        return key

    def report(self, key: Any) -> str:
        """What the tuning for `key` measured, a line per choice, and what it chose."""
        return self.tunings.report(key)

    def _tune(self, key: Any, args: tuple, kwargs: dict, stream: Any) -> Choice:
        """The choice for `key`: filed by an earlier tuning of this call's code on a GPU like
        this one, else timed here (and filed), or without a GPU the first that compiles."""
        if knobs.interpret or not runtime.has_gpu():
            compiled = self._compiled(key, args, kwargs)
            self.tunings.timings[key][compiled[0].name] = "chosen without timing (no GPU)"
            return compiled[0]
        first = self.choices[0]  # every choice takes the same arguments
        arrays = dict(first.kernel.signature.bind(args, first.arguments(kwargs), user_location()).arrays())
        handle = launch_stream(stream, current_stream_source(list(arrays.values())))
        device = runtime.device_array(next(iter(arrays.values())), stream=handle).device if arrays else 0
        disk_key = self._disk_key(key, device) if knobs.kernel_cache else None
        if disk_key is None:
            return self._time(key, args, kwargs, arrays, handle, device)
        files = TuningFiles()
        with files.locked(disk_key):  # ranks tuning at once: one times, the others read its choice
            filed = files.load(disk_key, frozenset(self._by_name))
            if filed is None:
                best = self._time(key, args, kwargs, arrays, handle, device)
                files.store(disk_key, best.name, self.tunings.timings[key])
                return best
        name, results = filed
        self.tunings.timings[key] = results
        return self._by_name[name]

    def _disk_key(self, key: Any, device: int) -> str | None:
        """The key of this call's tuning for `key` across processes: every choice's name and code
        (`Specializations.code_key`), the tuning key's text and the device's model; None when one
        of them has no text that is the same in every process (`code_digest.keyable`)."""
        key_text = value_text(key)
        codes = [choice.kernel.specializations.code_key() for choice in self.choices]
        if not keyable(key_text) or any(code is None for code in codes):
            return None
        facts = runtime.device_facts(device)
        digest = hashlib.sha256()
        for part in (TUNINGS_FORMAT, key_text, facts.name, repr(facts.compute_capability),
                     str(facts.multiprocessor_count), str(facts.driver_version), repr(self.restore),
                     *(f"{choice.name}\0{code}" for choice, code in zip(self.choices, codes))):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def _compiled(self, key: Any, args: tuple, kwargs: dict) -> list[Choice]:
        """The choices that compile for the call, the others' reasons kept; at least one."""
        timings = self.tunings.timings[key] = {}
        compiled = []
        for choice in self.choices:
            try:
                choice.kernel.compile(*args, **choice.arguments(kwargs))
            except AsyncDSLError as error:
                timings[choice.name] = f"does not compile: {error}"
            else:
                compiled.append(choice)
        if not compiled:
            raise _none_left("compiles for these arguments", timings)
        return compiled

    def _time(self, key: Any, args: tuple, kwargs: dict, arrays: dict, handle: int, device: int) -> Choice:
        """The fastest of the choices that compile, timed on the GPU (see the module docstring)."""
        compiled = self._compiled(key, args, kwargs)
        timings = self.tunings.timings[key]
        saved = self._save(arrays, compiled[0].kernel.__name__, handle)
        best, best_ms = None, math.inf
        for choice in compiled:
            try:
                ms = device_milliseconds(partial(choice, *args, stream=handle, **kwargs), handle,
                                         device=device, warmup=self.warmup, repeat=self.repeat)
            except AsyncDSLError as error:  # compiled, but the device refused it (resources, say)
                timings[choice.name] = f"did not run: {error}"
                continue
            finally:
                for original, array in saved:
                    copy_on_stream(original, array, handle)
            timings[choice.name] = ms
            if ms < best_ms:
                best, best_ms = choice, ms
        if best is None:
            raise _none_left("ran on the GPU", timings)
        return best

    def _save(self, arrays: dict, kernel_name: str, stream: int) -> list:
        """(copy, array) for each of the call's `arrays` (name -> array) named in `restore`, the
        copy made on `stream`."""
        unknown = [name for name in self.restore if name not in arrays]
        if unknown:
            raise ArgumentError(f"restore names {', '.join(unknown)}, not array arguments of "
                                f"{kernel_name} ({', '.join(arrays)})", user_location())
        saved = []
        for name in self.restore:
            array = runtime.device_array(arrays[name], name, stream=stream)
            original = empty(array.shape, array.dtype, array.device)
            copy_on_stream(array, original, stream)
            saved.append((original, array))
        return saved


def _none_left(what: str, timings: dict) -> ArgumentError:
    """The error of a tuning that has no choice left, with every choice's reason."""
    reasons = "\n  ".join(f"{name}: {reason}" for name, reason in timings.items())
    return ArgumentError(f"no choice of this autotuned call {what}:\n  {reasons}", user_location())


def autotune(choices: Iterable[Choice], key: Callable[..., Any] | None = None, restore: Sequence[str] = (),
             warmup: int = 2, repeat: int = 10) -> Autotuned:
    """One call standing for several kernels or constexpr settings (`Choice`s), which runs the one
    measured fastest for each argument layout (see `asyncdsl.jit.autotune`)."""
    return Autotuned(choices, key, restore, warmup, repeat)


def _layout_key(args: tuple, kwargs: dict) -> tuple:
    """Arrays by shape and dtype, everything else by value (its repr when it cannot be hashed)."""
    def describe(value: Any) -> Any:
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is not None and dtype is not None:
            return "array", tuple(int(extent) for extent in shape), str(dtype)
        if type(value) is float:  # by its bits: a NaN equals no value, and would tune every call
            return constexpr_key(value)
        try:
            hash(value)
        except TypeError:
            return repr(value)
        return value

    return tuple(describe(value) for value in args) + tuple(
        (name, describe(value)) for name, value in sorted(kwargs.items()))
