"""Facts files: one YAML file per device class. Code reads facts; it never hard-codes a device."""
from __future__ import annotations

from functools import cache
from importlib import resources

import yaml


@cache
def load(name: str) -> dict:
    """The facts file ``<name>.yaml`` as a dict."""
    path = resources.files("nbxtensor.device.facts").joinpath(f"{name}.yaml")
    if not path.is_file():
        known = sorted(p.name[:-5] for p in resources.files("nbxtensor.device.facts").iterdir()
                       if p.name.endswith(".yaml"))
        raise FileNotFoundError(f"no facts file {name}.yaml; known: {', '.join(known)}")
    return yaml.safe_load(path.read_text())


def all_facts() -> list[dict]:
    """Every facts file, in name order."""
    folder = resources.files("nbxtensor.device.facts")
    return [load(p.name[:-5]) for p in sorted(folder.iterdir(), key=lambda p: p.name) if p.name.endswith(".yaml")]
