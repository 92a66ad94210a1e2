"""The architecture's rules, checked over the AST of every module of geogp (#42):

* a model kind is known by its family's flags, never by ``isinstance`` against a model class
  outside the registry and that model's own modules, nor by probing a family's option names;
* no private name (leading underscore) of geogp is read or written outside the package (the
  folder) that defines it: an attribute through ``obj._name``, ``getattr(obj, "_name")``,
  ``setattr``/``hasattr``, or an import ``from geogp.x import _name``.

Privacy is per package, as in Python's own convention for ``_module`` files: the modules of
one folder (a model's mixins, say) are one unit.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from geogp import families

PACKAGE = Path(__file__).resolve().parents[1] / "geogp"


def _modules() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}


def _package(path: Path) -> str:
    return str(path.parent.relative_to(PACKAGE.parent))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_privates(modules) -> dict[str, set[str]]:
    """Private name → the packages that define it (an attribute of self or cls, a function,
    method or class, a class attribute, or a module-level name)."""
    out = defaultdict(set)
    for path, tree in modules.items():
        pkg = _package(path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[node.name].add(pkg)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    out[node.attr].add(pkg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out[node.id].add(pkg)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[node.target.id].add(pkg)
    return {k: v for k, v in out.items() if _private(k)}


def _private_uses(tree: ast.Module):
    """(node, name) of every private attribute used on something other than self or cls,
    by attribute syntax, by getattr/setattr/hasattr with a constant, or imported from geogp."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                yield node, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value)):
            owner = node.args[0]
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                yield node, node.args[1].value
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("geogp"):
            for alias in node.names:
                if _private(alias.name):
                    yield node, alias.name


def _model_classes() -> dict[str, str]:
    """Model class name → the module of its model (from the registry; two names may share a
    class: "nonstationary" is the lattice model's)."""
    return {c: module for _, module, cls in families._REGISTRY.values()
            for c in ((cls,) if isinstance(cls, str) else cls)}


def _own_files(module: str) -> tuple[str, ...]:
    """Where a model's own code lives: its package under geogp/models (the model, its family
    adapter and its file codec)."""
    return ("/".join(module.split(".")[:3]),)


def test_no_private_name_is_used_outside_its_package():
    modules = _modules()
    defined = _defined_privates(modules)
    found = []
    for path, tree in modules.items():
        pkg = _package(path)
        for node, name in _private_uses(tree):
            owners = defined.get(name)
            if owners and pkg not in owners:  # geogp's own private name, from another package
                found.append(f"{_where(path, node)} {name} (defined in {sorted(owners)})")
    assert not found, "private names used across packages:\n" + "\n".join(found)


def test_no_isinstance_on_a_model_class_outside_its_own_code():
    classes = _model_classes()
    registry = PACKAGE / "families" / "__init__.py"
    found = []
    for path, tree in _modules().items():
        rel = str(path.relative_to(PACKAGE.parent))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
                continue
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            for kind in kinds:
                name = kind.attr if isinstance(kind, ast.Attribute) else getattr(kind, "id", "")
                if name in classes and path != registry and not any(
                        rel == own or rel.startswith(own + "/")
                        for own in _own_files(classes[name])):
                    found.append(f"{_where(path, node)} isinstance(…, {name})")
    assert not found, "model kinds probed by isinstance:\n" + "\n".join(found)


def test_no_option_name_probe_outside_the_families():
    found = []
    for path, tree in _modules().items():
        if path.parent.name == "families":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
                    and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                    and any("option_names" in ast.unparse(c) for c in node.comparators)):
                found.append(f"{_where(path, node)} {ast.unparse(node)}")
    assert not found, "option-name probes:\n" + "\n".join(found)


def test_the_checks_see_what_they_forbid():
    """The three scanners on a snippet that breaks each rule once."""
    tree = ast.parse("from geogp.models.lattice.gmrf import _SHARED\n"
                     "x = est._posterior\ny = getattr(est, '_absorbed', None)\n"
                     "z = 'posterior_tile' in fam.option_names()\n")
    names = sorted(name for _, name in _private_uses(tree))
    assert names == ["_SHARED", "_absorbed", "_posterior"]
    assert "LatticeRegressor" in _model_classes()


# ----------------------------------------------------------------------------- import graph
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module → the geogp modules it imports when it is imported: module-level imports (also
    inside if/try at module level, not under TYPE_CHECKING), and the modules named by string
    in a module that calls ``importlib.import_module`` (the registry's lazy edges)."""
    modules = {_module_name(p): (p, t) for p, t in _modules().items()}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, (path, tree) in modules.items():
        edges = set()

        def visit(body, name=name, path=path, edges=edges):
            for node in body:
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    continue
                if isinstance(node, ast.Import):
                    edges.update(owner(a.name) for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
                        for _ in range(node.level - 1):
                            pkg = pkg.rpartition(".")[0]
                        base = f"{pkg}.{base}" if base else pkg
                    for a in node.names:
                        edges.add(owner(f"{base}.{a.name}") if f"{base}.{a.name}" in modules
                                  else owner(base))
                elif isinstance(node, (ast.If, ast.Try)):
                    visit(node.body)
                    visit(node.orelse)
                    for handler in getattr(node, "handlers", []):
                        visit(handler.body)

        visit(tree.body)
        if "import_module" in ast.unparse(tree):  # "module" or "module:ATTRIBUTE"
            edges.update(n.value.partition(":")[0] for n in ast.walk(tree)
                         if isinstance(n, ast.Constant) and isinstance(n.value, str)
                         and n.value.partition(":")[0] in modules)
        graph[name] = {e for e in edges if e and e.startswith("geogp") and e != name}
    return graph


def test_no_import_cycle_also_through_importlib():
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    graph = _import_graph()
    names = sorted(graph)
    index = {n: i for i, n in enumerate(names)}
    edges = [(index[a], index[b]) for a, bs in graph.items() for b in bs if b in index]
    rows, cols = zip(*edges, strict=True)
    matrix = csr_matrix(([1] * len(edges), (rows, cols)), shape=(len(names), len(names)))
    count, label = connected_components(matrix, directed=True, connection="strong")
    cycles = [sorted(n for n in names if label[index[n]] == c) for c in range(count)]
    cycles = [c for c in cycles if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"
    assert "geogp.models.lattice.family" in graph["geogp.families"]  # the lazy edges are seen


def test_the_numerical_core_never_imports_the_layers_above_it():
    """core/, features/, linalg/ and the models (their adapters and codecs aside) import neither
    the front end, nor placement, cross-validation, the command line or the registry; core/
    imports nothing of geogp but itself and the exceptions."""
    above = ("geogp.frontend", "geogp.cli", "geogp.crossval", "geogp.placement", "geogp.families",
             "geogp.persist")
    found = []
    for name, edges in _import_graph().items():
        core = name.startswith(("geogp.core", "geogp.features", "geogp.linalg", "geogp.models"))
        adapter = name.endswith((".family", ".codec"))
        if core and not adapter:
            found += [f"{name} → {e}" for e in edges if e.startswith(above)]
        if name.startswith("geogp.core"):
            found += [f"{name} → {e}" for e in edges
                      if not e.startswith(("geogp.core", "geogp.exceptions"))]
    assert not found, "\n".join(found)
