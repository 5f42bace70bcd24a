"""The abstract values the interpreter tracks: is it in the autograd graph, and what is it.

`Grad` is a small lattice. ATTACHED and FREE are proven by the code; LIKELY is "attached by
naming convention only" (a parameter called `criterion`), which rules may act on only in the
unsafe tier; UNKNOWN is the top: a rule never rewrites on it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Any


class Grad(Enum):
    FREE = "free"  # no autograd history: numbers, detached tensors, values made under no_grad
    ATTACHED = "attached"  # proven part of a graph
    LIKELY = "likely"  # part of a graph by naming convention only
    UNKNOWN = "unknown"

    # Members are compared by identity: hash them so too. `Enum`'s own hash is Python code
    # (it hashes the name), and the analysis hashes these in every memo key it builds.
    __hash__ = object.__hash__

    def join(self, other: Grad) -> Grad:
        """What is known of a value that may come from either side (a branch, a loop)."""
        if self is other:
            return self
        if Grad.UNKNOWN in (self, other):
            return Grad.UNKNOWN
        if Grad.FREE in (self, other):  # attached on one path, free on the other
            return Grad.UNKNOWN
        return Grad.LIKELY

    def combine(self, other: Grad) -> Grad:
        """What is known of the result of an operation on both (`a * b`): attached if either is."""
        if Grad.ATTACHED in (self, other):
            return Grad.ATTACHED
        if Grad.LIKELY in (self, other):
            return Grad.LIKELY
        if Grad.UNKNOWN in (self, other):
            return Grad.UNKNOWN
        return Grad.FREE

    @property
    def attached(self) -> bool:
        return self in (Grad.ATTACHED, Grad.LIKELY)


class Kind(Enum):
    NUMBER = "number"  # a Python int/float/bool
    TENSOR = "tensor"
    LIST = "list"
    DICT = "dict"
    TUPLE = "tuple"
    MODULE = "module"  # an nn.Module: calling it runs a forward
    CRITERION = "criterion"  # an nn.*Loss instance or a loss function
    PASSTHROUGH = "passthrough"  # a parameterless module: its output follows its input
    OPTIMIZER = "optimizer"
    OBJECT = "object"  # an instance of a class defined in this file (see `Value.cls`)
    FUNCTION = "function"  # a function defined in this file (see `Value.cls` for its name)
    CLASS = "class"  # a class defined in this file (see `Value.cls` for its name)
    UNKNOWN = "unknown"

    # Members are compared by identity: hash them so too. `Enum`'s own hash is Python code
    # (it hashes the name), and the analysis hashes these in every memo key it builds.
    __hash__ = object.__hash__


# Values are never changed once made: `with_` makes a changed copy. Not `frozen=True`: a frozen
# dataclass sets each field through `object.__setattr__`, which made building values (hundreds
# of thousands for a model library's files) a noticeable share of the interpreter's time.
# `__eq__` and `__hash__` are written below, over `__dict__`, not generated.
@dataclass(eq=False)
class Value:
    grad: Grad = Grad.UNKNOWN
    kind: Kind = Kind.UNKNOWN
    scalar: bool = False  # proven to hold one element (so `.item()` works)
    cls: str | None = None  # the class (OBJECT) or function (FUNCTION) name
    # For an instance: the file's classes its class derives from, nearest first, so that
    # instances of sibling classes join into one of their common base (`Metric` for a PSNR
    # and an MAE metric) rather than into an object of no known class.
    bases: tuple[str, ...] = ()
    # For a join of instances of the file's classes that share no base of the file (an
    # `nn.ModuleDict` of two metric classes deriving from `nn.Module` only): each class it
    # may be an instance of, so that calling it runs each one's `forward`.
    classes: tuple[str, ...] = ()
    element: Grad | None = None  # for containers: what their elements are
    # ...and, when every element stored is known, what they are in full (a dict of losses
    # holds losses, a dict of meters holds instances): `element` stays its `grad`.
    element_value: Value | None = None
    parts: tuple[Value, ...] | None = None  # for tuples of known length: each element
    evidence: str = ""  # why it is attached, for messages
    reduction_none: bool = False  # a criterion built with reduction='none'
    loss: bool = False  # a loss, or computed from one: what GF001 (not GF002) is about
    # A tensor that requires grad but has no history (a parameter, `requires_grad=True`):
    # keeping it keeps no graph; operations on it do record one.
    leaf: bool = False
    # For a dict: what the entries stored under constant string keys hold, each in full
    # (`out["loss"]` a scalar loss, `out["metrics"]` a dict of numbers), where `element_value`
    # joins them all. A key not listed reads as `element_value`.
    entries: tuple[tuple[str, Value], ...] | None = None
    # Attached (or likely so) on some path and proven free on another (`adv = 0.0`, then
    # `adv = criterion(...)` under an `if`), or computed from such a value: the join is
    # UNKNOWN, yet a graph may be kept.
    attached_on_some_path: bool = False
    # A list literal with no items (`[]`) that nothing was stored into yet: on its path the
    # list holds nothing, so a join keeps what the other path stored (`xs = []`, then
    # `xs.append(m)` under an `if`: `xs` holds `m`'s kind of value).
    empty: bool = False

    # What the generated methods did, field by field, with C's comparison and hashing of a
    # dict's values in place of two tuples built in Python: a value's `__dict__` holds
    # exactly its fields, in their order (`__init__` sets each in turn; `with_` copies one
    # and only replaces fields), so comparing dicts compares the same pairs, and the tuple
    # hashed is the tuple the generated `__hash__` hashed.
    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Value:
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    def join(self, other: Value) -> Value:
        if self is other or self == other:  # `==` compares every field
            return self
        if other is UNKNOWN:
            # A key one path bound and the other did not (the commonest join): what the
            # general case below gives when every field of `other` is its default.
            return Value(
                evidence=self.evidence,
                reduction_none=self.reduction_none,
                attached_on_some_path=self.attached_on_some_path,
            )
        if self.empty and other.kind is Kind.LIST:
            return other
        if other.empty and self.kind is Kind.LIST:
            return self
        element = None
        if self.element is not None and other.element is not None:
            element = self.element.join(other.element)
        element_value = None
        if self.element_value is not None and other.element_value is not None:
            element_value = self.element_value.join(other.element_value)
        parts = None
        if (
            self.parts is not None
            and other.parts is not None
            and len(self.parts) == len(other.parts)
        ):
            parts = tuple(a.join(b) for a, b in zip(self.parts, other.parts, strict=True))
        cls, bases = _common_class(self, other)
        classes: tuple[str, ...] = ()
        if cls is None and self.kind is other.kind and self.kind in (Kind.MODULE, Kind.OBJECT):
            mine, theirs = self.classes or (self.cls,), other.classes or (other.cls,)
            if None not in mine and None not in theirs:
                classes = tuple(dict.fromkeys((*mine, *theirs)))  # type: ignore[arg-type]
        mixed = (self.grad is Grad.FREE and other.grad.attached) or (
            other.grad is Grad.FREE and self.grad.attached
        )
        return Value(
            parts=parts,
            grad=self.grad.join(other.grad),
            kind=self.kind if self.kind is other.kind else Kind.UNKNOWN,
            scalar=self.scalar and other.scalar,
            cls=cls,
            bases=bases,
            classes=classes,
            element=element,
            element_value=element_value,
            evidence=self.evidence or other.evidence,
            reduction_none=self.reduction_none or other.reduction_none,
            loss=self.loss and other.loss,
            leaf=self.leaf and other.leaf,
            entries=_joined_entries(self.entries, other.entries),
            attached_on_some_path=(
                mixed or self.attached_on_some_path or other.attached_on_some_path
            ),
        )

    def with_(self, **changes: Any) -> Value:
        """A copy of this value with the fields `changes` names set (`dataclasses.replace`,
        without its per-field work)."""
        if not changes.keys() <= _FIELDS:
            raise TypeError(f"Value has no field {sorted(changes.keys() - _FIELDS)}")
        copy = object.__new__(Value)
        copy.__dict__.update(self.__dict__, **changes)
        return copy

    def element_read(self) -> Value:
        """What reading one element of this container gives (`xs[i]`, `for x in xs`)."""
        if self.element_value is not None:
            return self.element_value
        return Value(self.element) if self.element is not None else UNKNOWN

    def storing(self, item: Value) -> Value:
        """This container after `item` is stored into it (`xs.append(item)`, `d[k] = item`):
        a store under a key gradfix does not know may replace any known entry."""
        if self.element is None:
            return self.with_(element=item.grad, element_value=item, entries=None, empty=False)
        element_value = None if self.element_value is None else self.element_value.join(item)
        return self.with_(
            element=self.element.join(item.grad), element_value=element_value, entries=None
        )

    def storing_entry(self, key: str, item: Value) -> Value:
        """This dict after `item` is stored under the constant key `key` (`d["loss"] = item`)."""
        kept = tuple(entry for entry in self.entries or () if entry[0] != key)
        return self.storing(item).with_(entries=(*kept, (key, item)))

    def entry(self, key: str) -> Value | None:
        """What the entry under the constant key `key` holds, None when it is not known."""
        for name, value in self.entries or ():
            if name == key:
                return value
        return None


_FIELDS = frozenset(field.name for field in fields(Value))


def _common_class(left: Value, right: Value) -> tuple[str | None, tuple[str, ...]]:
    """The nearest class both values are instances of, with its own bases; (None, ()) when
    there is none (or either value's class is unknown)."""
    if left.cls == right.cls:
        return left.cls, left.bases if left.bases == right.bases else ()
    if left.cls is None or right.cls is None:
        return None, ()
    lineage = (left.cls, *left.bases)
    theirs = {right.cls, *right.bases}
    for position, name in enumerate(lineage):
        if name in theirs:
            return name, lineage[position + 1 :]
    return None, ()


def _joined_entries(
    left: tuple[tuple[str, Value], ...] | None, right: tuple[tuple[str, Value], ...] | None
) -> tuple[tuple[str, Value], ...] | None:
    """The entries known on both paths, each joined; a key known on one path only is left to
    `element_value`."""
    if left is None or right is None:
        return None
    theirs = dict(right)
    return tuple((key, value.join(theirs[key])) for key, value in left if key in theirs)


def container_of(kind: Kind, items: list[Value], unpacked: bool = False) -> Value:
    """A list, tuple or dict literal holding `items`; `unpacked`: some of them are unpacked
    iterables (`[*xs]`, `{**d}`), whose elements only their `element` describes."""
    element: Value | None = None
    for item in items:
        element = item if element is None else element.join(item)
    grad = None if element is None else element.grad
    return Value(
        Grad.FREE,
        kind,
        element=grad,
        element_value=None if unpacked else element,
        empty=kind is Kind.LIST and not items and not unpacked,
    )


UNKNOWN = Value()
NUMBER = Value(Grad.FREE, Kind.NUMBER, scalar=True)
FREE_TENSOR = Value(Grad.FREE, Kind.TENSOR)
