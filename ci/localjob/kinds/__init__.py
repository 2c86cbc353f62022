"""The job kinds the runner runs, one module each: a JobModel subclass (base.py) that holds its controller's
whole contract. A new kind is a new module here; nothing else names it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from ci.localjob.kinds.base import JobModel


def _discover() -> dict[str, type[JobModel]]:
    kinds = {}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for model in vars(module).values():
            defined_here = inspect.isclass(model) and model.__module__ == module.__name__
            if defined_here and issubclass(model, JobModel) and not inspect.isabstract(model):
                kinds[model.kind] = model
    return kinds


KINDS = _discover()


def job_model(manifest: dict, port: int | None = None) -> JobModel:
    """The model of a rendered job, by its kind; `port` replaces its rendezvous port (the runner's --port)."""
    kind = manifest.get("kind")
    if kind not in KINDS:
        raise ValueError(f"kind {kind}: the local runner runs {', '.join(sorted(KINDS))} only")
    return KINDS[kind](manifest, port)
