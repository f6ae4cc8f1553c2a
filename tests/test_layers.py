"""The layout rules of docs/architecture.md, read from the code's own imports (ast).

The folder is the layer and layers import only downward:

    ground floor  asyncdsl.{errors, dtypes, kernel_binary, ir_locations, config}
    hw            the ground floor
    dialects      hw and the ground floor
    passes        dialects, hw, the ground floor
    interpret     dialects, hw, the ground floor
    runtime       hw and the ground floor
    frontend      everything below it (the kernel language)
    jit           the frontend and everything below it (the host side: specialisation, caches,
                  launches, autotune, profiles)
    blocks        the frontend and everything below it (in-kernel building blocks: no host side)
    kernels       blocks, jit and everything below them (the library's kernels and host functions)
    fuzz, examples, the top (asyncdsl itself, cli, torch)   anything but each other's insides
    ops           kernels and the top (differentiable torch operators built on asyncdsl.torch)

Every import counts, also one inside a function.  Also checked: no import cycle between modules
(imports only for type checking, under `if TYPE_CHECKING:`, cannot form one at run time),
no module over 600 lines, `os.environ` only in config.py, no import kept only for its side
effects (a `noqa: F401` outside the package's public `__init__`), and a package whose docstring
lists its modules lists every one.  Each rule is one test whose failure names every offender.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"asyncdsl": ROOT / "asyncdsl", "asyncdsl.dialects": ROOT / "dialects",
           "asyncdsl.passes": ROOT / "passes"}
GROUND = {"asyncdsl.errors", "asyncdsl.dtypes", "asyncdsl.kernel_binary", "asyncdsl.ir_locations",
          "asyncdsl.config"}
# Which layers each layer may import (besides itself and the ground floor).
ALLOWED = {
    "ground": set(),
    "hw": set(),
    "dialects": {"hw"},
    "passes": {"dialects", "hw"},
    "interpret": {"dialects", "hw"},
    "runtime": {"hw"},
    "frontend": {"dialects", "hw", "passes", "interpret", "runtime"},
    "jit": {"dialects", "hw", "passes", "interpret", "runtime", "frontend"},
    "blocks": {"dialects", "hw", "passes", "interpret", "runtime", "frontend"},
    "kernels": {"dialects", "hw", "passes", "interpret", "runtime", "frontend", "jit", "blocks"},
    "top": {"dialects", "hw", "passes", "interpret", "runtime", "frontend", "jit", "blocks", "kernels",
            "examples"},
    "ops": {"dialects", "hw", "passes", "interpret", "runtime", "frontend", "jit", "blocks", "kernels",
            "top"},
    "examples": {"dialects", "hw", "passes", "interpret", "runtime", "frontend", "jit", "blocks", "kernels",
                 "top", "ops"},
    "fuzz": {"dialects", "hw", "passes", "interpret", "runtime", "frontend", "jit", "blocks", "kernels",
             "top"},
}
LAYERS = ("hw", "dialects", "passes", "interpret", "runtime", "frontend", "jit", "blocks", "kernels",
          "ops", "examples", "fuzz")
MAX_LINES = 600
# A library kernel reads in one sitting; a tutorial is shorter still.
READABLE_LINES = {"kernels": 250, "examples": 150}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def layer(module: str) -> str:
    if module in GROUND:
        return "ground"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "top"  # asyncdsl itself, cli, __main__


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:`."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside |= {id(child) for statement in node.body for child in ast.walk(statement)}
    return inside


def imports(module: str) -> tuple[set[str], set[str]]:
    """The asyncdsl modules `module` imports (a name imported from a package counts as its
    submodule when it is one): all of them, and those it imports at run time (not under
    `if TYPE_CHECKING:`)."""
    tree = ast.parse(MODULES[module].read_text())
    skipped = _type_checking_blocks(tree)
    every, run_time = set(), set()
    package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        found = set()
        if isinstance(node, ast.Import):
            found = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
        found = {name for name in found if name in MODULES and name != module}
        every |= found
        if id(node) not in skipped:
            run_time |= found
    return every, run_time


@functools.cache
def graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The import graph and its run-time part, module -> the modules it imports: read once, when a
    test first asks (not at collection, which every pytest-xdist worker repeats)."""
    edges = {module: imports(module) for module in MODULES}
    return ({module: every for module, (every, _) in edges.items()},
            {module: run_time for module, (_, run_time) in edges.items()})


def offenders(found: list[str]) -> str:
    """A failure message: every offender on a line of its own."""
    return f"{len(found)} offenders:\n  " + "\n  ".join(found)


def test_the_import_graph_is_read():
    # A few edges the code certainly has: a scanner that found none would pass every rule.
    graph, _ = graphs()
    assert "asyncdsl.passes.pipeline" in graph["asyncdsl.jit.specializations"]
    assert "asyncdsl.frontend.tracer" in graph["asyncdsl.jit.specialize"]
    assert "asyncdsl.hw.limits" in graph["asyncdsl.hw.tma"]
    assert "asyncdsl.dialects.asyncdsl" in graph["asyncdsl.interpret.tma"]
    assert layer("asyncdsl.runtime.launch") == "runtime" and layer("asyncdsl.errors") == "ground"
    assert layer("asyncdsl.jit.kernel") == "jit" and layer("asyncdsl.cli") == "top"
    assert "asyncdsl.torch" in graph["asyncdsl.ops.rms_norm"] and layer("asyncdsl.ops.llama") == "ops"


def test_layers_import_only_downward():
    graph, _ = graphs()
    wrong = []
    for module in sorted(MODULES):
        own = layer(module)
        allowed = ALLOWED[own] | {own, "ground"}
        wrong += [f"{module} ({own}) imports {target} ({layer(target)})"
                  for target in sorted(graph[module]) if layer(target) not in allowed]
    assert not wrong, offenders(wrong)


def test_no_import_cycles():
    _, run_time_graph = graphs()
    # Tarjan's strongly connected components over the module graph.
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in run_time_graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            # A package's __init__ importing its own submodules is not a cycle of two modules.
            if len(component) > 1:
                cycles.append(" <-> ".join(sorted(component)))

    for module in sorted(run_time_graph):
        if module not in index:
            visit(module)
    assert not cycles, offenders(cycles)


def test_modules_stay_small():
    sizes = {module: len(path.read_text().splitlines()) for module, path in MODULES.items()}
    large = [f"{module} has {lines} lines" for module, lines in sorted(sizes.items()) if lines > MAX_LINES]
    assert not large, f"split these by concept (at most {MAX_LINES} lines): " + offenders(large)


def test_kernels_and_tutorials_read_in_one_sitting():
    long = [f"{module} has {lines} lines (at most {limit})" for module, path in sorted(MODULES.items())
            for layer, limit in READABLE_LINES.items() if module.startswith(f"asyncdsl.{layer}.")
            and (lines := len(path.read_text().splitlines())) > limit]
    assert not long, "build these from blocks: " + offenders(long)


def test_the_environment_is_read_in_config_only():
    reads = []
    for module in sorted(MODULES):
        if module == "asyncdsl.config":
            continue
        tree = ast.parse(MODULES[module].read_text())
        reads += [f"{module}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")]
    assert not reads, "add a knob to asyncdsl/config.py instead: " + offenders(reads)


def test_nothing_is_imported_for_its_side_effects():
    kept = [module for module in sorted(MODULES)
            if module != "asyncdsl" and "noqa: F401" in MODULES[module].read_text()]  # the API re-exports
    assert not kept, "imports kept only for their side effects: " + offenders(kept)


def test_package_docstrings_that_list_modules_list_every_one():
    """A package docstring with a paragraph "Modules: `a` (...), `b`, ..." names each of the
    package's modules (and subpackages) in backquotes there."""
    missing = []
    for package, path in sorted(MODULES.items()):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if path.name != "__init__.py" or "Modules:" not in docstring:
            continue
        listed = set(re.findall(r"`(\w+)`", docstring[docstring.index("Modules:"):]))
        modules = {child.stem for child in path.parent.glob("*.py") if not child.stem.startswith("__")}
        modules |= {child.name for child in path.parent.iterdir() if (child / "__init__.py").exists()}
        missing += [f"{package} does not list {name}" for name in sorted(modules - listed)]
    assert not missing, offenders(missing)


def test_the_contributing_layout_matches_the_tree():
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    section = guide[guide.index("## Layout") : guide.index("## Adding a feature")]
    block = section.split("```")[1]
    listed = {line.split()[0].rstrip("/") for line in block.splitlines() if line.strip()}
    packages = {str(path.parent.relative_to(ROOT)) for path in MODULES.values()}
    tree = packages | {"tests", "benchmarks", "docs"}
    assert listed == tree, f"CONTRIBUTING.md's Layout lists {sorted(listed)}, the tree has {sorted(tree)}"


def test_the_guide_lists_every_knob():
    from asyncdsl.config import KNOBS

    page = (ROOT / "docs" / "guide" / "getting-started.md").read_text()
    for knob in KNOBS:
        assert f"`{knob.variable}`" in page, f"getting-started.md's knob table lacks {knob.variable}"
