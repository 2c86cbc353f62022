"""Kubernetes CPU quantities, as far as a local run reads them."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation


def cpu_millicores(quantity: object) -> Decimal:
    """`500m` → 500, `2` or `1.5` → 2000 or 1500; ValueError for anything else."""
    text = str(quantity)
    try:
        return Decimal(text[:-1]) if text.endswith("m") else Decimal(text) * 1000
    except InvalidOperation:
        raise ValueError(f"CPU quantity {text!r} is not a number of cores or millicores") from None
