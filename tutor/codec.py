"""Dataclasses to JSON-ready data and back, from their type annotations.

The check's result (:mod:`tutor.harness.result`) crosses the worker's process
boundary as JSON and the student's progress (:mod:`tutor.state.progress`) is kept as
JSON: both are dataclasses, written and read here, so a new field is one line
(the field, with its default).  The rules, kept small on purpose:

* **encode**: a dataclass becomes a dict of its fields in declaration order,
  then the properties its class names in ``JSON_PROPERTIES`` (figures derived
  from the fields that a reader of the JSON wants without recomputing them);
  lists and tuples become lists, dicts stay dicts, every other value is kept as
  it is (``json.dumps`` decides what it can write).
* **decode**: the opposite, guided by the annotations: a dict becomes the
  annotated dataclass, a list its element type, a dict its value type; a key
  naming a ``JSON_PROPERTIES`` entry or a field with ``init=False`` is dropped
  (it is derived); a missing field takes its default.  Scalars are kept as
  they came (no coercion: a file read and written again is unchanged), and
  ``Literal`` values are not checked here (a reader that must refuse an unknown
  value says so in its own words).  A key the class does not know is passed to
  the constructor, which refuses it (``TypeError``), unless ``ignore_unknown``
  is set for the outer object.

No third-party codec: msgspec and cattrs each do this and more, but the two
formats here are plain dataclasses with a handful of derived keys, and this
module is what the project needs of either (about sixty lines, no new dependency).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Hashable, Mapping
from functools import cache
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints

T = TypeVar("T")

# class attribute naming the properties written after a dataclass's fields
PROPERTIES = "JSON_PROPERTIES"


def encode(value: Any) -> Any:
    """``value`` as dicts, lists and scalars (see the module docstring)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in getattr(type(value), PROPERTIES, ()):
            data[name] = encode(getattr(value, name))
        return data
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any, *, ignore_unknown: bool = False) -> T:
    """The ``cls`` dataclass that :func:`encode` wrote as ``data``."""
    if not isinstance(data, Mapping):
        return cls(**data)  # the constructor's own TypeError
    fields, derived = _fields(cast(Hashable, cls))
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in derived:
            continue
        if key in fields:
            kwargs[key] = _value(fields[key], value)
        elif not ignore_unknown:
            kwargs[key] = value  # refused by the constructor, in its words
    return cls(**kwargs)


def decode_field(cls: type, name: str, value: Any) -> Any:
    """``value`` as the annotated type of field ``name`` of ``cls``."""
    return _value(_fields(cls)[0][name], value)


@cache
def _fields(cls: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """The annotated type of each field the constructor takes, and the derived names."""
    hints = get_type_hints(cls)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    derived = {f.name for f in dataclasses.fields(cls) if not f.init} | set(getattr(cls, PROPERTIES, ()))
    return fields, frozenset(derived)


def _value(tp: Any, value: Any) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        return _value(kinds[0], value) if len(kinds) == 1 else value
    if origin is list:
        return [_value(args[0], v) for v in value]
    if origin is dict:
        return {k: _value(args[1], v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, value)
    return value  # a scalar, a Literal, a TypedDict or Any: as it came
