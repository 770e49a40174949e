"""Building the IR text of a scan body: SSA values of the compute type (or
i1) and the arith / math / flexsn ops that make them, with constants
shared."""

from __future__ import annotations

import math

from . import surrogate as _sg
from ._errors import UnsupportedOpError

class Value:
    """An SSA value of the scan body: a compute-type float ('f') or an i1 ('b')."""
    __slots__ = ("name", "kind")

    def __init__(self, name: str, kind: str):
        self.name, self.kind = name, kind


class Body:
    def __init__(self, ftype: str):
        self.ft = ftype
        self.lines: list[str] = []
        self.count = 0
        self._consts: dict[tuple, Value] = {}

    def emit(self, text: str, kind: str) -> Value:
        name = f"%v{self.count}"
        self.count += 1
        self.lines.append(f"    {name} = {text}")
        return Value(name, kind)

    def const(self, v: float) -> Value:
        v = float(v)
        key = ("f", repr(v))
        if key not in self._consts:
            if math.isfinite(v):
                lit = _sg.float_literal(v)
            else:
                bits = {"f32": {1: "0x7F800000", -1: "0xFF800000", 0: "0x7FC00000"},
                        "f64": {1: "0x7FF0000000000000", -1: "0xFFF0000000000000",
                                0: "0x7FF8000000000000"}}[self.ft]
                lit = bits[0 if math.isnan(v) else (1 if v > 0 else -1)]
            self._consts[key] = self.emit(f"arith.constant {lit} : {self.ft}", "f")
        return self._consts[key]

    def bconst(self, v: bool) -> Value:
        key = ("b", bool(v))
        if key not in self._consts:
            self._consts[key] = self.emit(
                f"arith.constant {'true' if v else 'false'}", "b")
        return self._consts[key]

    # Coercions -------------------------------------------------------------
    def as_float(self, v) -> Value:
        if isinstance(v, Value):
            if v.kind == "f":
                return v
            return self.emit(f"arith.uitofp {v.name} : i1 to {self.ft}", "f")
        if isinstance(v, (bool, int, float)):
            return self.const(float(v))
        raise UnsupportedOpError(f"unsupported operand {v!r}")

    def as_bool(self, v) -> Value:
        if isinstance(v, Value):
            if v.kind == "b":
                return v
            return self.cmp("une", v, 0.0)
        if isinstance(v, (bool, int, float)):
            return self.bconst(bool(v))
        raise UnsupportedOpError(f"unsupported operand {v!r}")

    # Ops --------------------------------------------------------------------
    def binary(self, op: str, a, b) -> Value:
        a, b = self.as_float(a), self.as_float(b)
        return self.emit(f"{op} {a.name}, {b.name} : {self.ft}", "f")

    def unary(self, op: str, a) -> Value:
        a = self.as_float(a)
        return self.emit(f"{op} {a.name} : {self.ft}", "f")

    def add(self, a, b): return self.binary("arith.addf", a, b)
    def sub(self, a, b): return self.binary("arith.subf", a, b)
    def mul(self, a, b): return self.binary("arith.mulf", a, b)
    def div(self, a, b): return self.binary("arith.divf", a, b)
    def neg(self, a): return self.unary("arith.negf", a)

    def cmp(self, pred: str, a, b) -> Value:
        a, b = self.as_float(a), self.as_float(b)
        return self.emit(f"arith.cmpf {pred}, {a.name}, {b.name} : {self.ft}", "b")

    def select(self, c, a, b) -> Value:
        c = self.as_bool(c)
        if isinstance(a, Value) and isinstance(b, Value) and a.kind == b.kind == "b":
            return self.emit(f"arith.select {c.name}, {a.name}, {b.name} : i1", "b")
        a, b = self.as_float(a), self.as_float(b)
        return self.emit(f"arith.select {c.name}, {a.name}, {b.name} : {self.ft}", "f")

    def logic(self, op: str, a, b) -> Value:
        a, b = self.as_bool(a), self.as_bool(b)
        return self.emit(f"arith.{op} {a.name}, {b.name} : i1", "b")

    def lnot(self, a) -> Value:
        return self.logic("xori", a, True)

    def round_to(self, a, storage: str) -> Value:
        """Rounds a compute value to a narrower float type and back."""
        a = self.as_float(a)
        t = self.emit(f"arith.truncf {a.name} : {self.ft} to {storage}", "t")
        return self.emit(f"arith.extf {t.name} : {storage} to {self.ft}", "f")
