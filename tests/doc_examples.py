"""The Python examples of README.md and of every page of docs/guide/, block by block, for the
tests that run them: tests/test_doc_examples.py without a GPU, tests/gpu/test_doc_examples_gpu.py
with one.

A block is a fenced code block whose info string starts with `python`.  The words after it say
what the block needs, and so what a machine without a GPU does with it:

    ```python            runs: numpy arrays, kernels in the interpreter (`kernel.interpret`);
                         every kernel it interprets is also compiled and assembled by ptxas
    ```python gpu        runs, but every kernel call, `interpret` and `profile` compiles its
                         kernel and ptxas assembles it instead of running it (launches return
                         None and write nothing, so checks of their results belong in a
                         plain block); `asyncdsl.runtime.to_device` keeps arrays on the host
    ```python torch      needs torch: compiled by Python, its asyncdsl names looked up
    ```python fragment   an excerpt (`...` for what it leaves out): compiled by Python, its
                         asyncdsl names looked up

The blocks of one page share one namespace and run in order, as a reader types them.  With a
GPU, every block but fragments runs as written.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MARKERS = frozenset({"gpu", "torch", "fragment"})
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<info>.*)$")


def pages() -> list[Path]:
    """README.md and the guide's pages, in reading order of their file names."""
    return [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One ```python block: where it starts (the line of its first code line), its markers."""

    path: Path
    line: int
    markers: frozenset[str]
    source: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def code(self):
        """The block compiled so that tracebacks, and the kernels' own source locations, name the
        page's lines."""
        return compile("\n" * (self.line - 1) + self.source, str(self.path), "exec")


def blocks(path: Path) -> list[Block]:
    """The page's ```python blocks, in order (other fences are skipped whole)."""
    found, lines, index = [], path.read_text().splitlines(), 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        index += 1
        if opening is None:
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        words = opening["info"].split()
        body_start = index
        while index < len(lines) and not lines[index].strip().startswith(fence):
            index += 1
        if words and words[0] == "python":
            # A fence indented inside a list item: its lines lose as many spaces as it has.
            body = [line[min(indent, len(line) - len(line.lstrip(" "))):]
                    for line in lines[body_start:index]]
            found.append(Block(path, body_start + 1, frozenset(words[1:]), "\n".join(body) + "\n"))
        index += 1  # the closing fence
    return found


def fresh_namespace() -> dict:
    return {"__name__": "__doc_example__"}


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def run(block: Block, namespace: dict) -> None:
    """Run the block in the page's namespace; a failure says which block (its cause, where in
    it)."""
    try:
        exec(block.code(), namespace)
    except Exception as error:
        raise AssertionError(f"{block.where}: the example fails: {type(error).__name__}: {error}") from error


def unresolved_names(block: Block, namespace: dict) -> list[str]:
    """The asyncdsl names the block writes that do not exist: imports of asyncdsl modules and
    names, and attribute chains (`ad.kernels.softmax`) through modules and classes from a name
    bound to an asyncdsl module (here or by an earlier block of the page).  Modules that need
    what is not installed (torch) are looked up in their source."""
    tree = ast.parse(block.source)
    bound = {name: value.__name__ for name, value in namespace.items()
             if isinstance(value, ModuleType) and _ours(value.__name__)}
    missing: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _ours(alias.name):
                    continue
                if importlib.util.find_spec(alias.name) is None:
                    missing.append(alias.name)
                elif alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
            for alias in node.names:
                if _module(f"{node.module}.{alias.name}") is not None:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif not _defines(node.module, alias.name):
                    missing.append(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        chain = _chain(node)
        if chain and chain[0] in bound:
            problem = _resolve(bound[chain[0]], chain[1:])
            if problem is not None and problem not in missing:
                missing.append(problem)
    return missing


def _ours(module: str) -> bool:
    return module == "asyncdsl" or module.startswith("asyncdsl.")


def _chain(node) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not names or not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def _module(name: str):
    """The module `name` imported; a module that cannot import (it needs torch) as its name;
    None when there is no such module."""
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except ModuleNotFoundError:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return name


def _defines(module_name: str, name: str) -> bool:
    module = _module(module_name)
    if isinstance(module, ModuleType):
        return hasattr(module, name)
    if module is None:
        return False
    source = Path(importlib.util.find_spec(module_name).origin).read_text()
    return name in _top_level_names(ast.parse(source))


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _resolve(module_name: str, attributes: list[str]) -> str | None:
    """None when `module.a.b...` exists as far as modules and classes go; else the first
    missing name."""
    current: object = _module(module_name)
    path = module_name
    for attribute in attributes:
        if isinstance(current, str):  # a module that cannot import here: read its source
            return None if _defines(current, attribute) else f"{path}.{attribute}"
        if not (isinstance(current, ModuleType) or inspect.isclass(current)):
            return None  # an object's attributes are the running blocks' to check
        if hasattr(current, attribute):
            current = getattr(current, attribute)
        elif isinstance(current, ModuleType) and _module(f"{current.__name__}.{attribute}") is not None:
            current = _module(f"{current.__name__}.{attribute}")
        else:
            return f"{path}.{attribute}"
        path = f"{path}.{attribute}"
    return None
