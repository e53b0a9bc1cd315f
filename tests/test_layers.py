"""The engine's layers import in one direction: a module imports only modules of its
own layer or of layers below it; the engine never imports the widgets; the widgets
use only the engine's public names (no module or name that starts with ``_``)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# lowest first; a module may import its own layer and the layers before it
LAYERS = [
    ("errors", "limits", "events", "suites"),
    ("ir", "schema"),
    ("te", "ir_json"),
    ("schedule",),
    ("lower",),
    ("target", "backends"),
    ("workload", "workload_json", "ops"),
    ("measure",),
    ("features", "space"),
    ("cost_model",),
    ("search", "database"),
    ("tune", "task_scheduler", "feature_cache"),
    ("cli",),                    # the command line: one module per command
]
RANK = {name: n for n, names in enumerate(LAYERS) for name in names}
PACKAGE = len(LAYERS) - 1        # explorer/__init__.py gathers the public API


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path):
    """(imported module, names) for every import in the file, relative ones resolved."""
    mod = _module(path).split(".")
    pkg = mod if path.name == "__init__.py" else mod[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names = tuple(a.name for a in node.names)
            if not node.module:          # from . import te, ops: each is a module
                for n in names:
                    yield f"{target}.{n}", ()
            else:
                yield target, names


def _rank(module: str):
    parts = module.split(".")
    if parts[0] != "explorer":
        return None
    return PACKAGE if len(parts) == 1 else RANK.get(parts[1])


def _files(pkg: str):
    return sorted((ROOT / pkg).rglob("*.py"))


def test_every_engine_module_has_a_layer():
    unknown = {_module(p).split(".")[1] for p in _files("explorer")
               if _module(p) != "explorer" and _rank(_module(p)) is None}
    assert not unknown, f"give these modules a layer in LAYERS: {sorted(unknown)}"


def test_no_engine_module_imports_a_higher_layer_or_the_widgets():
    bad = []
    for p in _files("explorer"):
        me = _module(p)
        for target, _ in _imports(p):
            if target.split(".")[0] == "widgets":
                bad.append(f"{me} imports {target} (the engine never imports widgets)")
            r = _rank(target)
            if r is not None and me != "explorer" and r > _rank(me):
                bad.append(f"{me} (layer {_rank(me)}) imports {target} (layer {r})")
    assert not bad, "\n".join(bad)


def test_widgets_use_only_public_engine_names():
    bad = []
    for p in _files("widgets"):
        for target, names in _imports(p):
            if target.split(".")[0] != "explorer":
                continue
            private = [x for x in target.split(".") + list(names) if x.startswith("_")]
            if private:
                bad.append(f"{_module(p)} imports {target} {names}")
    assert not bad, "\n".join(bad)
