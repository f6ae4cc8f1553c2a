"""Every ```python block of README.md and of docs/guide/*.md on the GPU, as a reader would run
them: plain, `gpu` and `torch` blocks all run as written, in order, one namespace a page;
fragments are compiled by Python only (tests/doc_examples.py; tests/test_doc_examples.py is the
run without a GPU).

Run:  python -m pytest tests/gpu/test_doc_examples_gpu.py -v -rA
"""

from __future__ import annotations

import importlib.util

import doc_examples
import pytest
from gpu_support import hopper_or_skip

hopper_or_skip()
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("page", doc_examples.pages(), ids=doc_examples.page_id)
def test_every_python_block_of_the_page_runs_on_the_gpu(page):
    namespace = doc_examples.fresh_namespace()
    for block in doc_examples.blocks(page):
        if "fragment" in block.markers:
            block.code()
            continue
        if "torch" in block.markers and importlib.util.find_spec("torch") is None:
            pytest.skip(f"{block.where} needs torch, which is not installed")
        doc_examples.run(block, namespace)
