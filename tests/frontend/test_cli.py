"""The `asyncdsl` command and the IR dumps: what a kernel author sees of each stage."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import asyncdsl as ad
from asyncdsl.cli import STAGES, main
from asyncdsl.examples import tile_copy

EXAMPLE = tile_copy.__file__


def test_dump_prints_every_stage_then_the_ptx(capsys):
    assert main(["dump", EXAMPLE]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("// =====")]
    assert (headers == [f"// ===== tile_copy: after {stage} =====" for stage in STAGES]
            + ["// ===== tile_copy: PTX ====="])
    assert '"asyncdsl.async_copy"' in out and '"asyncdsl.tma_load"' in out and ".target sm_90a" in out


def test_dump_after_one_pass(capsys):
    assert main(["dump", f"{EXAMPLE}:tile_copy", "--after", "allocate-smem"]) == 0
    out = capsys.readouterr().out
    assert out.count("// =====") == 1
    assert "asyncdsl.smem_bytes" in out and "offset 0" in out
    assert ".version" not in out


def test_dump_ptx_only(capsys):
    assert main(["dump", EXAMPLE, "--ptx"]) == 0
    out = capsys.readouterr().out
    assert out.count("// =====") == 1 and "cp.async.bulk.tensor.2d" in out


def test_dump_explains_missing_example_arguments(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text(textwrap.dedent('''
        import asyncdsl as ad

        @ad.kernel
        def lonely(x):
            ad.smem((8, 8), x.dtype)
    '''))
    with pytest.raises(SystemExit, match=r"no example arguments for lonely; give them on the command line"):
        main(["dump", str(source)])
    with pytest.raises(SystemExit, match="no kernel named 'other'"):
        main(["dump", f"{source}:other"])


@pytest.mark.parametrize("entry", ["(spec, spec)", "((spec,),)", "((spec,), None)"])
def test_dump_explains_malformed_example_arguments(tmp_path, entry):
    source = tmp_path / "kernels.py"
    source.write_text(textwrap.dedent(f'''
        import asyncdsl as ad

        @ad.kernel
        def lonely(x):
            ad.smem((8, 8), x.dtype)

        spec = ad.ArraySpec((8, 8), ad.float32)
        EXAMPLE_ARGS = {{"lonely": {entry}}}
    '''))
    with pytest.raises(SystemExit, match=r"EXAMPLE_ARGS\['lonely'\] must be a pair \(args, kwargs\)"):
        main(["dump", str(source)])


def test_dump_reports_kernel_errors_with_their_line(tmp_path, capsys):
    source = tmp_path / "broken.py"
    source.write_text(textwrap.dedent('''
        import asyncdsl as ad

        @ad.kernel
        def broken(x):
            buf = ad.smem((8, 8), x.dtype)
            ad.async_copy(x.at[ad.ds(0, 8), ad.ds(0, 8)], buf)

        EXAMPLE_ARGS = {"broken": ((ad.ArraySpec((8, 8), ad.float32),), {})}
    '''))
    assert main(["dump", str(source)]) == 1
    assert f"{source}:7: " in capsys.readouterr().err


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "ptxas:" in out and "GPU:" in out


def test_python_dash_m_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "asyncdsl", "dump", EXAMPLE, "--after", "trace"],
        capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "asyncdsl.async_copy" in done.stdout


def test_a_closed_pipe_stops_the_command_quietly():
    # `asyncdsl dump ... | head`: the reader is gone before the first line is printed.
    command = subprocess.Popen([sys.executable, "-m", "asyncdsl", "dump", EXAMPLE],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    command.stdout.close()
    err = command.stderr.read()
    assert command.wait() == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_dump_env_prints_stages_as_kernels_compile(monkeypatch, capsys):
    monkeypatch.setenv("ASYNCDSL_DUMP_IR", "1")

    @ad.kernel
    def fresh(x):
        ad.smem((8, 8), x.dtype)

    fresh.compile(ad.ArraySpec((8, 8), ad.float32))
    err = capsys.readouterr().err
    for stage in (*STAGES, "ptx"):
        assert f"// ----- asyncdsl: after {stage} -----" in err


def test_kernel_ir_after_a_pass_and_unknown_passes():
    spec = ad.ArraySpec((64, 64), ad.float32)
    text = tile_copy.tile_copy.ir(spec, spec, BM=32, BN=32, after="resolve-transforms")
    assert "asyncdsl.tma_store" in text and "asyncdsl.async_copy" not in text
    with pytest.raises(ad.ArgumentError, match="unknown pass 'fuse'"):
        tile_copy.tile_copy.ir(spec, spec, BM=32, BN=32, after="fuse")


def test_profile_writes_a_trace_and_prints_the_summary(tmp_path, capsys, monkeypatch):
    import json

    import profile_kernels

    monkeypatch.chdir(tmp_path)
    assert main(["profile", f"{profile_kernels.__file__}:specialized_copy", "--interpret"]) == 0
    out = capsys.readouterr().out
    assert "kernel specialized_copy: 4 warpgroups" in out and "wait slot" in out and "ui.perfetto.dev" in out
    trace = json.loads((tmp_path / "specialized_copy.trace.json").read_text())
    assert {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"} == {
        "specialized_copy", "wait slot", "load", "wait tile", "store"}


def test_profile_draws_the_timeline_when_asked(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import profile_kernels

    assert main(["profile", f"{profile_kernels.__file__}:specialized_copy", "--interpret", "--plot",
                 "--out-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "specialized_copy.timeline.png").read_bytes().startswith(b"\x89PNG")


def test_profile_explains_missing_example_arguments(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text("import asyncdsl as ad\n\n@ad.kernel\ndef lonely(x):\n    pass\n")
    with pytest.raises(SystemExit, match="asyncdsl profile: .* no example arguments for lonely"):
        main(["profile", str(source)])


def test_cache_counts_what_the_disk_holds_and_clears_only_its_own_folders(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "1")
    @ad.kernel(grid=(1,), block=128)
    def touch(x):
        bar = ad.barrier()
        bar.arrive()
        bar.wait()

    touch.binary((ad.ArraySpec((256, 128), ad.float32),), {})  # compiled and filed on disk
    (tmp_path / "someone-elses.txt").write_text("keep me")
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert ("cubins: 0 files" in out and "compiled kernels: 1 files" in out
            and "ASYNCDSL_KERNEL_CACHE=1" in out)
    assert main(["cache", "--clear"]) == 0
    assert "cleared" in capsys.readouterr().out
    assert not (tmp_path / "binary").exists() and (tmp_path / "someone-elses.txt").read_text() == "keep me"
    main(["cache"])
    assert "compiled kernels: 0 files" in capsys.readouterr().out


LONE_COPY = '''
import asyncdsl as ad

@ad.kernel(grid=lambda src, dst, scale, BM, SPLIT: (src.shape[0] // BM,))
def scaled_rows(src, dst, scale: float, BM: ad.constexpr, SPLIT: ad.constexpr = "m"):
    rows = ad.smem((BM, src.shape[1]), src.dtype)
    bar = ad.barrier()
    ad.async_copy(src.at[ad.ds(ad.program_id(0) * BM, BM), :], rows, barrier=bar)
    bar.wait()
    ad.async_copy(rows, dst.at[ad.ds(ad.program_id(0) * BM, BM), :])
    ad.await_async_copy(0)
'''


def test_dump_takes_the_arguments_from_the_command_line(tmp_path, capsys):
    source = tmp_path / "rows.py"
    source.write_text(LONE_COPY)  # no EXAMPLE_ARGS
    assert main(["dump", str(source), "--args", "src=bf16[256, 64] dst=bf16[256,64] scale=0.5 BM=64",
                 "--after", "trace"]) == 0
    out = capsys.readouterr().out
    assert "memref<256x64xbf16>" in out and "// ===== scaled_rows: after trace =====" in out
    assert main(["dump", f"{source}:scaled_rows", "--ptx",
                 "--args", "src=f32[128,32] dst=f32[128,32] scale=2.0 BM=32 SPLIT='n'"]) == 0
    assert ".target sm_90a" in capsys.readouterr().out


def test_argument_specs_read_arrays_and_literals():
    from asyncdsl.cli import argument_specs

    assert argument_specs(" x=f32[1024, 512]  y=e4m3[8] BM=64 scale=-0.5 ON=True S='m' C=(2,1) ", "dump") == {
        "x": ad.ArraySpec((1024, 512), ad.float32), "y": ad.ArraySpec((8,), ad.float8_e4m3fn),
        "BM": 64, "scale": -0.5, "ON": True, "S": "m", "C": (2, 1)}


@pytest.mark.parametrize("specs, message", [
    ("", "no arguments given"),
    ("src f32[8]", "'src' is not NAME=VALUE"),
    ("=f32[8]", "'' in '=f32[8]' is not a parameter name"),
    ("x=f33[8]", "x=f33[8]: unknown dtype 'f33'"),
    ("x=f32[8,-1]", "x=f32[8,-1]: an array's dims are positive integers"),
    ("x=f32[]", "x=f32[]: an array's dims are positive integers"),
    ("x=f32", "x=f32 names an element type but no shape: write x=f32[D0,D1,...]"),
    ("S=m", "S=m is neither an array (DTYPE[D0,D1,...]) nor a Python literal (a string needs quotes: S='m')"),
    ("x=f32[8] x=f32[8]", "x is given twice"),
])
def test_malformed_argument_specs_say_what_is_wrong(specs, message):
    from asyncdsl.cli import argument_specs

    with pytest.raises(SystemExit) as stopped:
        argument_specs(specs, "dump")
    assert str(stopped.value).startswith(f"asyncdsl dump: --args: {message}")


def test_argument_specs_must_name_the_kernels_parameters(tmp_path):
    source = tmp_path / "rows.py"
    source.write_text(LONE_COPY + "\n\n@ad.kernel\ndef other(x):\n    pass\n")
    with pytest.raises(SystemExit, match=r"defines 2 kernels \(scaled_rows, other\): name the one --args"):
        main(["dump", str(source), "--args", "x=f32[8,8]"])
    with pytest.raises(SystemExit, match=r"no value for dst, scale, BM of scaled_rows\(src, dst, "):
        main(["dump", f"{source}:scaled_rows", "--args", "src=f32[64,64]"])
    with pytest.raises(SystemExit, match=r"scaled_rows\(src, dst, scale, BM, SPLIT\) has no parameter BN"):
        main(["dump", f"{source}:scaled_rows", "--args",
              "src=f32[64,64] dst=f32[64,64] scale=1.0 BM=64 BN=64"])


def test_profile_takes_the_arguments_from_the_command_line(tmp_path, capsys, monkeypatch):
    source = tmp_path / "rows.py"
    source.write_text(LONE_COPY)
    monkeypatch.chdir(tmp_path)
    assert main(["profile", str(source), "--interpret",
                 "--args", "src=f32[128,32] dst=f32[128,32] scale=1.0 BM=64"]) == 0
    assert (tmp_path / "scaled_rows.trace.json").is_file()
    assert "kernel scaled_rows" in capsys.readouterr().out


def test_an_argument_the_kernel_refuses_names_no_line_of_the_command_itself(tmp_path):
    source = tmp_path / "rows.py"
    source.write_text(LONE_COPY)
    done = subprocess.run([sys.executable, "-m", "asyncdsl", "dump", str(source), "--ptx",
                           "--args", "src=f32[128,32] dst=f32[128,32] scale='x' BM=64"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    # The error belongs to the call the command made, whose caller is runpy's frame: no user line.
    assert done.stderr.startswith("asyncdsl dump: argument 'scale'"), done.stderr
    assert "<frozen" not in done.stderr
