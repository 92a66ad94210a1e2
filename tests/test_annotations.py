"""Every public function and method of geogp is annotated (issue #30, "habits").

Public: a function or method whose name has no leading underscore (constructors included),
at module level or in a class without one, in a module whose path has none. Fully annotated:
every parameter but ``self``/``cls``, ``*args`` and ``**kwargs`` included, and the return.
Shapes stay in words in the docstrings; ruff's ANN rules would also demand annotations on
the private helpers, hence this check instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "geogp"


def _public_module(path: Path) -> bool:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return not any(p.startswith("_") and p not in ("__init__", "__main__") for p in parts)


def _missing(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    args = fn.args
    params = args.posonlyargs + args.args + args.kwonlyargs
    static = any(getattr(d, "id", None) == "staticmethod" for d in fn.decorator_list)
    if method and not static and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    out = [a.arg for a in params if a.annotation is None]
    out += [f"*{a.arg}" for a in (args.vararg,) if a is not None and a.annotation is None]
    out += [f"**{a.arg}" for a in (args.kwarg,) if a is not None and a.annotation is None]
    return out + (["return"] if fn.returns is None else [])


def _unannotated() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _public_module(path):
            continue

        def visit(body: list, cls: str | None = None, path: Path = path) -> None:
            for node in body:
                if isinstance(node, ast.ClassDef) and cls is None and not node.name.startswith("_"):
                    visit(node.body, node.name)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    public = not node.name.startswith("_") or (cls and node.name == "__init__")
                    setter = any(getattr(d, "attr", None) == "setter" for d in node.decorator_list)
                    missing = _missing(node, cls is not None) if public and not setter else []
                    if missing:
                        name = f"{cls}.{node.name}" if cls else node.name
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}: "
                                     f"{', '.join(missing)}")

        visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def test_public_functions_are_annotated():
    missing = _unannotated()
    assert not missing, "unannotated public functions:\n" + "\n".join(missing)
