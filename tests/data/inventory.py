"""Stock levels for a small shop: what is on the shelves and what to reorder."""

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    count: int
    reorder_at: int
    price: float


def total_value(items: list[Item]) -> float:
    """What everything on the shelves is worth."""
    return sum(item.count * item.price for item in items)


def to_reorder(items: list[Item]) -> list[str]:
    """Names of the items at or below their reorder level, sorted."""
    low = [item.name for item in items if item.count <= item.reorder_at]
    return sorted(low)


def restock(items: list[Item], name: str, amount: int) -> None:
    """Add `amount` to the item called `name`; an unknown name is an error."""
    for item in items:
        if item.name == name:
            item.count += amount
            return
    raise KeyError(name)


def report(items: list[Item]) -> str:
    """One line per item, then the total."""
    lines = [f"{item.name:<12} {item.count:>4} x {item.price:>7.2f}" for item in items]
    lines.append(f"{'total':<12} {total_value(items):>16.2f}")
    return "\n".join(lines)
