"""asyncdsl.autotune on the CPU: which choices it keeps and why, one tuning per argument layout,
the fastest by the timer's word (a stand-in timer here; tests/gpu/test_autotune_gpu.py times on
the GPU), and the errors of bad use."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.jit.autotune as autotune_module
from asyncdsl import dtypes
from asyncdsl.examples.tile_copy import tile_copy
from asyncdsl.runtime import DeviceArray, DeviceFacts


def square(b: int) -> ad.Choice:
    """The tile copy example in b x b tiles."""
    return ad.Choice(tile_copy, BM=b, BN=b)


def named(b: int) -> str:
    return square(b).name


def _arrays(shape=(64, 64)):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    return x, np.zeros_like(x)


def _device_arrays(shape=(64, 64)):
    """Two arrays as the GPU path sees them (nothing is launched: the timer stands in)."""
    return tuple(DeviceArray(address, shape, (shape[1], 1), dtypes.float32, 0)
                 for address in (0x7F0000000000, 0x7F0000100000))


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")


H200 = DeviceFacts(0, "NVIDIA H200", (9, 0), 232448, 132, 13000)


@pytest.fixture
def stand_in_gpu(monkeypatch, tmp_path):
    """A GPU as far as the tuner asks, with a timer that gives the next of `times` (or raises it);
    tunings filed in a cache directory of the test's own."""
    times: list = []
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "1")
    monkeypatch.setattr(autotune_module.runtime, "device_facts", lambda device=0: H200)

    def timer(call, stream, device, warmup, repeat):
        value = times.pop(0)
        if isinstance(value, Exception):
            raise value
        return value

    monkeypatch.delenv("ASYNCDSL_INTERPRET", raising=False)
    monkeypatch.setattr(autotune_module.runtime, "has_gpu", lambda: True)
    monkeypatch.setattr(autotune_module, "device_milliseconds", timer)
    return times


def test_in_the_interpreter_the_first_choice_that_compiles_runs(interpreted):
    # 7 x 7 tiles: a box row of 28 bytes, which TMA refuses (rows are multiples of 16 bytes).
    tuned = ad.autotune([square(7), square(16), square(32)])
    x, y = _arrays()
    tuned(x, y)
    np.testing.assert_array_equal(y, x)
    assert tuned.chosen(x, y).constexprs == {"BM": 16, "BN": 16}
    (timings,) = tuned.timings.values()
    assert timings[named(7)].startswith("does not compile:") and "16" in timings[named(7)]
    assert timings[named(16)] == "chosen without timing (no GPU)"
    assert named(32) not in timings


def test_each_argument_layout_is_tuned_once(interpreted):
    tuned = ad.autotune([square(16), square(32)])
    for shape in ((64, 64), (64, 64), (32, 64), (64, 64)):
        tuned(*_arrays(shape))
    assert len(tuned.timings) == 2
    by_dtype = ad.autotune([square(16)])
    by_dtype(*_arrays())
    by_dtype(np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16))
    assert len(by_dtype.timings) == 2


def test_a_float_argument_keys_the_tuning_by_its_bits():
    # A NaN equals no value, not even another NaN: keyed by value, every such call would tune again.
    layout = autotune_module._layout_key
    assert layout((float("nan"),), {"s": float("nan")}) == layout((float("nan"),), {"s": float("nan")})
    assert layout((0.0,), {}) != layout((-0.0,), {}) and layout((1.0,), {}) != layout((1,), {})


def test_a_key_function_decides_which_calls_share_a_choice(interpreted):
    tuned = ad.autotune([square(16)], key=lambda x, y: x.shape[1])
    tuned(*_arrays((64, 64)))
    tuned(*_arrays((32, 64)))
    assert list(tuned.timings) == [64]


def test_on_the_gpu_the_fastest_choice_is_kept_and_every_time_recorded(stand_in_gpu):
    stand_in_gpu.extend([3.0, 1.0, 2.0])
    choices = [square(16), square(32), square(64)]
    tuned = ad.autotune(choices)
    x, y = _device_arrays()
    assert tuned.chosen(x, y) is choices[1]
    assert tuned.timings[next(iter(tuned.timings))] == {named(16): 3.0, named(32): 1.0, named(64): 2.0}
    assert tuned.chosen(x, y) is choices[1] and not stand_in_gpu  # no second tuning


def test_the_tuning_is_printed_when_asked(stand_in_gpu, monkeypatch, capsys):
    monkeypatch.setenv("ASYNCDSL_PRINT_AUTOTUNING", "1")
    stand_in_gpu.extend([2.5, 0.5])
    tuned = ad.autotune([square(7), square(16), square(32)])
    tuned.chosen(*_device_arrays())
    tuned.chosen(*_device_arrays())  # tuned already: nothing more printed
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("asyncdsl.autotune (") and lines[0].endswith(": " + named(32))
    assert lines[1].startswith(f"  {named(7)}: does not compile:")
    assert lines[2:] == [f"      2.5000 ms  {named(16)}", f"      0.5000 ms  {named(32)}"]


def test_a_choice_the_device_refuses_is_left_out(stand_in_gpu):
    stand_in_gpu.extend([ad.ResourceError("too much shared memory"), 5.0])
    tuned = ad.autotune([square(16), square(32)])
    assert tuned.chosen(*_device_arrays()).constexprs == {"BM": 32, "BN": 32}
    (timings,) = tuned.timings.values()
    assert timings[named(16)] == "did not run: too much shared memory"


def test_when_nothing_compiles_the_error_lists_every_reason(interpreted):
    tuned = ad.autotune([square(7), square(6)])
    reasons = r"no choice .* compiles(.|\n)*tile_copy\(BM=7, BN=7\): (.|\n)*tile_copy\(BM=6, BN=6\): "
    with pytest.raises(ad.ArgumentError, match=reasons):
        tuned(*_arrays())


def test_restore_must_name_array_arguments(stand_in_gpu):
    tuned = ad.autotune([square(16)], restore=("z",))
    with pytest.raises(ad.ArgumentError, match="restore names z, not array arguments of tile_copy"):
        tuned.chosen(*_device_arrays())


def test_a_constexpr_fixed_by_the_choice_may_not_be_passed_again(interpreted):
    tuned = ad.autotune([square(16)])
    with pytest.raises(ad.ArgumentError, match="tile_copy\\(BM=16, BN=16\\) fixes BM"):
        tuned(*_arrays(), BM=32)


@pytest.mark.parametrize("make,message", [
    (lambda: ad.Choice(print, B=1), "takes an @asyncdsl.kernel"),
    (lambda: ad.autotune([]), "non-empty list of asyncdsl.Choice"),
    (lambda: ad.autotune([tile_copy]), "non-empty list of asyncdsl.Choice"),
    (lambda: ad.autotune([square(16)], restore="y"), "a tuple of names"),
    (lambda: ad.autotune([square(16)], repeat=0), "repeat must be an int >= 1"),
    (lambda: ad.autotune([square(16)], warmup=-1), "warmup must be an int >= 0"),
    (lambda: ad.autotune([square(16), square(32), square(16)]),
     r"told apart by name .* tile_copy\(BM=16, BN=16\) is given more than once"),
])
def test_bad_use_is_refused_at_the_users_line(make, message):
    with pytest.raises(ad.ArgumentError, match=message) as raised:
        make()
    assert raised.value.location is not None and raised.value.location.file.endswith("test_autotune.py")


# ------------------------------------------------------------------------- tunings kept on disk

TUNING_PROCESS = """
import sys
import asyncdsl as ad
import asyncdsl.jit.autotune as autotune_module
from asyncdsl import dtypes
from asyncdsl.examples.tile_copy import tile_copy
from asyncdsl.jit import specializations
from asyncdsl.runtime import DeviceArray, DeviceFacts

times = [float(t) for t in sys.argv[1:]]
counts = {"timed": 0, "traced": 0}

def timer(call, stream, device, warmup, repeat):
    counts["timed"] += 1
    return times.pop(0)

def compile_module(*args, **kwargs):
    counts["traced"] += 1
    return compile_now(*args, **kwargs)

compile_now = specializations.compile_module
specializations.compile_module = compile_module
autotune_module.device_milliseconds = timer
autotune_module.runtime.has_gpu = lambda: True
h200 = DeviceFacts(0, "NVIDIA H200", (9, 0), 232448, 132, 13000)
autotune_module.runtime.device_facts = lambda device=0: h200
tuned = ad.autotune([ad.Choice(tile_copy, BM=b, BN=b) for b in (16, 32, 64)])
x, y = (DeviceArray(address, (64, 64), (64, 1), dtypes.float32, 0)
        for address in (0x7F0000000000, 0x7F0000100000))
print(tuned.chosen(x, y).name, counts["timed"], counts["traced"], sep="|")
"""


def test_a_second_process_takes_the_choice_from_disk_without_timing(tmp_path):
    environment = {**os.environ, "ASYNCDSL_CACHE_DIR": str(tmp_path / "cache"), "ASYNCDSL_KERNEL_CACHE": "1"}
    environment.pop("ASYNCDSL_INTERPRET", None)

    def run(*times):
        done = subprocess.run([sys.executable, "-c", TUNING_PROCESS, *map(str, times)], env=environment,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        name, timed, traced = done.stdout.strip().split("|")
        return name, int(timed), int(traced)

    assert run(3.0, 1.0, 2.0) == (named(32), 3, 3)  # timed every choice, traced each
    assert run() == (named(32), 0, 0)  # no timer left to give: nothing timed, nothing traced


def test_the_disk_names_the_device_and_the_choices(stand_in_gpu, monkeypatch):
    stand_in_gpu.extend([3.0, 1.0])
    x, y = _device_arrays()
    assert ad.autotune([square(16), square(32)]).chosen(x, y).name == named(32)
    assert ad.autotune([square(16), square(32)]).chosen(x, y).name == named(32) and not stand_in_gpu
    stand_in_gpu.extend([1.0, 3.0])  # another set of choices: tuned again
    assert ad.autotune([square(16), square(64)]).chosen(x, y).name == named(16) and not stand_in_gpu
    h100 = DeviceFacts(0, "NVIDIA H100 80GB HBM3", (9, 0), 232448, 132, 13000)
    monkeypatch.setattr(autotune_module.runtime, "device_facts", lambda device=0: h100)
    stand_in_gpu.extend([1.0, 3.0])  # another GPU model: tuned again
    tuned = ad.autotune([square(16), square(32)])
    assert tuned.chosen(x, y).name == named(16) and not stand_in_gpu
    assert tuned.timings[next(iter(tuned.timings))] == {named(16): 1.0, named(32): 3.0}


def test_a_key_without_stable_text_is_tuned_in_every_process(stand_in_gpu):
    stand_in_gpu.extend([3.0, 1.0, 3.0, 1.0])
    x, y = _device_arrays()
    for _ in range(2):  # an object's default repr holds its address: no disk key
        tuned = ad.autotune([square(16), square(32)], key=lambda x, y: object())
        assert tuned.chosen(x, y).name == named(32)
    assert not stand_in_gpu


def test_without_the_kernel_cache_every_process_tunes(stand_in_gpu, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "0")
    stand_in_gpu.extend([3.0, 1.0, 1.0, 3.0])
    x, y = _device_arrays()
    assert ad.autotune([square(16), square(32)]).chosen(x, y).name == named(32)
    assert ad.autotune([square(16), square(32)]).chosen(x, y).name == named(16) and not stand_in_gpu


def test_a_tuning_file_that_is_damaged_or_names_other_choices_is_a_miss(tmp_path):
    from asyncdsl.jit.tunings import TuningFiles

    files = TuningFiles(tmp_path)
    names = frozenset({"a(B=1)", "a(B=2)"})
    files.store("k" * 64, "a(B=2)", {"a(B=1)": 2.0, "a(B=2)": 1.0})
    assert files.load("k" * 64, names) == ("a(B=2)", {"a(B=1)": 2.0, "a(B=2)": 1.0})
    assert files.load("k" * 64, frozenset({"a(B=1)"})) is None  # a choice this call does not have
    path = next(tmp_path.rglob("*.json"))
    path.write_bytes(path.read_bytes()[:-3])  # truncated: fails its checksum
    assert files.load("k" * 64, names) is None
    files._files.store("j" * 64, b"not json")
    assert files.load("j" * 64, names) is None
