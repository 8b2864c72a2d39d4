"""Run by tests/packaging/test_sam_build.py with Python 3.13 -S -E: import every module the functions need from
the built layer and function folders alone, and print where each loaded module came from (JSON).

`python import_layer.py <layer python dir> <twin dir> <function dir>...`

The layer's C extensions are built for aarch64 and cannot load on this machine. A finder placed first
hands out, for exactly those modules and only where the layer holds the aarch64 file, the x86_64 build of
the same locked version from <twin dir> (installed from the same lock file). Everything else must come
from the layer, the function folders or the standard library: the test checks that from the output.
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import json
import pkgutil
import sys
from pathlib import Path

AARCH64_SUFFIXES = (".cpython-313-aarch64-linux-gnu.so", ".abi3.so")


class TwinExtensions:
    def __init__(self, layer: Path, twin: Path) -> None:
        self.layer, self.twin, self.substituted = layer, twin, {}

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 (importlib's protocol)
        leaf = name.rpartition(".")[2]
        for folder in map(Path, path or sys.path):
            try:
                relative = folder.resolve().relative_to(self.layer)
            except ValueError:
                continue
            if not any((folder / (leaf + suffix)).is_file() for suffix in AARCH64_SUFFIXES):
                continue
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                twin_file = self.twin / relative / (leaf + suffix)
                if twin_file.is_file():
                    self.substituted[name] = str(twin_file)
                    loader = importlib.machinery.ExtensionFileLoader(name, str(twin_file))
                    return importlib.util.spec_from_file_location(name, twin_file, loader=loader)
            raise ImportError(f"{name}: the layer has an aarch64 build but the twin has no x86_64 build")
        return None


def needed_modules(package_dir: Path) -> set[str]:
    """Every module of the tickwork package, and every absolute import anywhere in it (lazy ones too)."""
    names = {"tickwork"}
    for info in pkgutil.walk_packages([str(package_dir)], prefix="tickwork."):
        names.add(info.name)
    for source in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return names


def main(layer: str, twin: str, *function_dirs: str) -> None:
    layer_dir = Path(layer).resolve()
    finder = TwinExtensions(layer_dir, Path(twin).resolve())
    sys.meta_path.insert(0, finder)
    sys.path[:0] = [*function_dirs, str(layer_dir)]  # as Lambda: /var/task, then the layer's /opt/python
    for folder in function_dirs:
        spec = importlib.util.spec_from_file_location(f"app_{Path(folder).name}", Path(folder) / "app.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    for name in sorted(needed_modules(layer_dir / "tickwork")):
        importlib.import_module(name)
    loaded = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}
    print(json.dumps({"modules": loaded, "substituted": finder.substituted, "stdlib": sys.prefix,
                      "base_stdlib": sys.base_prefix}))


if __name__ == "__main__":
    main(*sys.argv[1:])
