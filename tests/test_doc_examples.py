"""Every ```python block of README.md and of docs/guide/*.md, without a GPU: plain blocks run (in
the interpreter) and every kernel they interpret is assembled by ptxas; `gpu` blocks run with
their launches compiled and assembled instead; `torch` and `fragment` blocks are compiled and
their asyncdsl names looked up (tests/doc_examples.py says what each marker means)."""

from __future__ import annotations

import traceback

import doc_examples
import pytest
from ptx_digests import compile_instead_of_launching

import asyncdsl

PAGES = doc_examples.pages()


def _assemble_what_is_interpreted(patch, ptxas, assembled: list) -> None:
    """`interpret` and `interpret_profile` also compile the kernel for the GPU and assemble it."""
    kernel_class = type(asyncdsl.kernel(lambda: None))
    interpret, interpret_profile = kernel_class.interpret, kernel_class.interpret_profile

    def interpreting(self, *args, devices=None, **kwargs):
        interpret(self, *args, devices=devices, **kwargs)
        if devices is None:  # a kernel of several devices compiles per device count, on the GPU
            assembled.append(ptxas(self.ptx(*args, **kwargs)))

    def profiling(self, *args, **kwargs):
        profile = interpret_profile(self, *args, **kwargs)
        assembled.append(ptxas(self.ptx(*args, profile=True, **kwargs)))
        return profile

    patch(kernel_class, "interpret", interpreting)
    patch(kernel_class, "interpret_profile", profiling)


def check_block(block, namespace, monkeypatch, ptxas, assembled: list) -> None:
    unknown = block.markers - doc_examples.MARKERS
    assert not unknown, (f"{block.where}: unknown marker(s) {', '.join(sorted(unknown))} after "
                         f"```python (known: {', '.join(sorted(doc_examples.MARKERS))})")
    if block.markers & {"torch", "fragment"}:
        block.code()
        missing = doc_examples.unresolved_names(block, namespace)
        assert not missing, f"{block.where}: asyncdsl has no {', '.join(missing)}"
        return
    with monkeypatch.context() as patched:
        if "gpu" in block.markers:
            compile_instead_of_launching(patched.setattr,
                                         lambda compiled: assembled.append(ptxas(compiled.ptx)))
        else:
            _assemble_what_is_interpreted(patched.setattr, ptxas, assembled)
        doc_examples.run(block, namespace)


@pytest.mark.parametrize("page", PAGES, ids=doc_examples.page_id)
def test_every_python_block_of_the_page(page, monkeypatch, ptxas):
    namespace, assembled = doc_examples.fresh_namespace(), []
    for block in doc_examples.blocks(page):
        check_block(block, namespace, monkeypatch, ptxas, assembled)


def test_blocks_and_markers_are_read_as_written(tmp_path, monkeypatch, ptxas):
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```bash\npip install asyncdsl\n```\n\n"
        "```python\nimport asyncdsl as ad\nvalue = 1\n```\n\n"
        "  ```python fragment\n  ad.barrier()\n  ...\n  ```\n\n"
        "```python torch\nimport torch\nad.no_such_function(torch.empty(4))\n```\n")
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    found = doc_examples.blocks(page)
    assert [(block.line, block.markers) for block in found] == [
        (8, frozenset()), (13, frozenset({"fragment"})), (18, frozenset({"torch"}))]
    assert found[1].source == "ad.barrier()\n...\n"
    namespace = doc_examples.fresh_namespace()
    check_block(found[0], namespace, monkeypatch, ptxas, [])
    check_block(found[1], namespace, monkeypatch, ptxas, [])
    with pytest.raises(AssertionError, match=r"page.md:18: asyncdsl has no asyncdsl.no_such_function"):
        check_block(found[2], namespace, monkeypatch, ptxas, [])


def test_names_are_looked_up_through_modules_classes_and_imports():
    block = doc_examples.Block(doc_examples.ROOT / "README.md", 1, frozenset({"fragment"}), (
        "import asyncdsl as ad\nfrom asyncdsl.examples.tile_copy import tile_copy, no_copy\n"
        "import asyncdsl.torch\nfrom asyncdsl import runtime as rt\n"
        "ad.runtime.to_device\nad.Kernel.interpret\nad.Kernel.launch_everything\nrt.nowhere\n"
        "asyncdsl.torch.custom_op\nasyncdsl.torch.no_op\nad.WGMMA.anything_goes\n"))
    assert doc_examples.unresolved_names(block, {}) == [
        "asyncdsl.examples.tile_copy.no_copy", "asyncdsl.Kernel.launch_everything",
        "asyncdsl.runtime.nowhere", "asyncdsl.torch.no_op"]


def test_a_failing_example_names_its_page_line(tmp_path, monkeypatch, ptxas):
    page = tmp_path / "broken.md"
    page.write_text("```python\nimport numpy as np\n\nnp.zeros(3)[5]\n```\n")
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    [block] = doc_examples.blocks(page)
    with pytest.raises(AssertionError, match=r"broken.md:2: the example fails: IndexError") as failed:
        check_block(block, doc_examples.fresh_namespace(), monkeypatch, ptxas, [])
    frames = traceback.extract_tb(failed.value.__cause__.__traceback__)
    assert [frame.lineno for frame in frames if frame.filename == str(page)] == [4]  # the page's line


def test_a_gpu_block_assembles_its_launches_and_a_plain_one_what_it_interprets(tmp_path, monkeypatch,
                                                                              ptxas):
    page = tmp_path / "copies.md"
    page.write_text(
        "```python\nimport numpy as np\nimport asyncdsl as ad\n"
        "from asyncdsl.examples.tile_copy import tile_copy\n"
        "x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)\ny = np.zeros_like(x)\n"
        "tile_copy.interpret(x, y, BM=32, BN=32)\nassert (x == y).all()\n```\n\n"
        "```python gpu\nz = ad.runtime.to_device(np.zeros_like(x))\n"
        "tile_copy(ad.runtime.to_device(x), z, BM=64, BN=32)\n```\n")
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    namespace, assembled = doc_examples.fresh_namespace(), []
    plain, gpu = doc_examples.blocks(page)
    check_block(plain, namespace, monkeypatch, ptxas, assembled)
    check_block(gpu, namespace, monkeypatch, ptxas, assembled)
    assert len(assembled) == 2
    assert not namespace["z"].any()  # launched nothing
    assert type(asyncdsl.kernel(lambda: None)).__call__.__name__ == "__call__"  # patches undone
