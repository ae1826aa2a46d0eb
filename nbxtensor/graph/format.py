"""The graph format's vocabulary: the format tag and version, tensor id namespaces, symbolic shape
expressions, and the encoding of op arguments. docs/graph-format.md describes the file itself."""
from __future__ import annotations

import ast
import base64
import functools
import json
import math
import operator
import re

import numpy as np

from ..dtypes import all_dtypes, get_dtype

FORMAT_TAG = "nbxtensor.graph"
FORMAT_VERSION = 1
GRAPH_FILE = "graph.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"

INPUT, PARAM, BUFFER, CONST = "input::", "param::", "buffer::", "const::"
NAMESPACES = (INPUT, PARAM, BUFFER, CONST)
WEIGHT_NAMESPACES = (PARAM, BUFFER)
# the layouts a weight may ask for (its ``memory_format``), and the rank each needs; without one, row-major
WEIGHT_FORMAT_RANKS = {"channels_last": 4, "channels_last_3d": 5}

DTYPE_NAMES = frozenset(d.name for d in all_dtypes)

# Bounds on what a file may ask of the loader, far above what an exporter writes: a shape expression's
# length (parsing and evaluating recurse through its syntax tree), the nesting of a JSON document (its
# decoding and the checks of op arguments recurse through it), and the bytes of one tensor or arena
# (kernels address memory with 64-bit signed offsets).
MAX_EXPRESSION_CHARS = 1000
MAX_EXPRESSION_DEPTH = 100
MAX_JSON_NESTING = 64
MAX_TENSOR_BYTES = 2 ** 63 - 1


class GraphError(ValueError):
    """A graph directory that cannot be loaded or run as written; the message names the file and the
    op or tensor at fault."""


# ---- symbolic shape expressions -------------------------------------------------------------------
# An expression is an int, a symbol name, or + - * // % and parentheses over those, or Max(...) and Min(...) of
# two or more expressions: what torch.export's shape guards produce for the dimensions a model derives from its
# inputs (``2*s0``, ``s0 + 1``, ``Max(0, 1 - s0)`` of a slice that may be empty).
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}
_CALLS = {"Max": max, "Min": min}


def parse_expression(text: str, known_symbols) -> ast.AST:
    """The checked syntax tree of ``text``; refuses anything but ints, known symbols, + - * // % and Max/Min."""
    tree, names = _parsed(text)
    for name in names:
        if name not in known_symbols:
            raise ValueError(f"shape expression {text!r} names unknown symbol {name!r}")
    return tree


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[ast.AST, tuple[str, ...]]:
    """``text``'s syntax tree, checked to be integer arithmetic, and the names it uses: worked out once
    per expression, since a graph evaluates the same few expressions at every run."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"shape expression of {len(text)} characters is longer than the limit of "
                         f"{MAX_EXPRESSION_CHARS}")
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a null character
        raise ValueError(f"not a shape expression: {text!r}") from None
    depth = _depth(tree)
    if depth > MAX_EXPRESSION_DEPTH:
        raise ValueError(f"shape expression {text!r} nests {depth} levels deep, more than the limit of "
                         f"{MAX_EXPRESSION_DEPTH}")
    names, called = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if (not isinstance(node.func, ast.Name) or node.func.id not in _CALLS or len(node.args) < 2
                    or node.keywords):
                raise ValueError(f"shape expression {text!r} calls something other than Max or Min of two or "
                                 "more expressions")
            called.add(id(node.func))
        elif isinstance(node, ast.Name):
            if id(node) not in called:
                names.append(node.id)
        elif isinstance(node, ast.Constant):
            if type(node.value) is not int:
                raise ValueError(f"shape expression {text!r} holds a non-integer {node.value!r}")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise ValueError(f"shape expression {text!r} uses an operator other than + - * // %")
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and isinstance(node.right, ast.Constant) \
                    and node.right.value == 0:
                raise ValueError(f"shape expression {text!r} divides by zero")
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub):
                raise ValueError(f"shape expression {text!r} uses a unary operator other than -")
        elif not isinstance(node, (ast.operator, ast.unaryop, ast.Load)):
            raise ValueError(f"shape expression {text!r} holds {type(node).__name__}, not arithmetic")
    return tree, tuple(names)


def _depth(tree: ast.AST) -> int:
    """How many levels ``tree`` has, counted without recursing (the evaluator recurses this deep)."""
    deepest, pending = 0, [(tree, 1)]
    while pending:
        node, level = pending.pop()
        deepest = max(deepest, level)
        pending.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def evaluate_expression(text: str, values: dict[str, int]) -> int:
    """The value of ``text`` for symbol ``values``; ``ValueError`` naming the expression where a symbol
    has no value or a divisor is zero for these values."""
    tree, names = _parsed(text)
    return _evaluated(text, tree, names, values)


def _evaluated(text: str, tree: ast.AST, names: tuple[str, ...], values: dict[str, int]) -> int:
    for name in names:
        if name not in values:
            raise ValueError(f"shape expression {text!r} needs symbol {name!r}, which has no value")
    try:
        return _evaluate(tree, values)
    except ZeroDivisionError:
        raise ValueError(f"shape expression {text!r} divides by zero for "
                         f"{', '.join(f'{n}={values[n]}' for n in dict.fromkeys(names))}") from None


def _evaluate(node: ast.AST, values: dict[str, int]) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.UnaryOp):
        return -_evaluate(node.operand, values)
    if isinstance(node, ast.Call):
        return _CALLS[node.func.id](_evaluate(argument, values) for argument in node.args)
    return _BINARY[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))


def evaluate_dim(dim, values: dict[str, int]) -> int:
    return dim if isinstance(dim, int) else evaluate_expression(dim, values)


def evaluate_shape(shape, values: dict[str, int]) -> tuple[int, ...]:
    return tuple(evaluate_dim(dim, values) for dim in shape)


# ---- arguments ------------------------------------------------------------------------------------
# JSON keeps ints (1) and floats (1.0) apart and true/false apart from ints; everything else is an
# object with one tagging key, so a decoder never guesses.
_SPECIAL_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encode_float(value: float):
    if math.isnan(value):
        return {"float": "nan"}
    if math.isinf(value):
        return {"float": "inf" if value > 0 else "-inf"}
    return float(value)


def decode_argument(value, tensor_of, symbol_values: dict[str, int]):
    """The Python value of an encoded argument; ``tensor_of(id)`` supplies tensors (or their metadata)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode_argument(item, tensor_of, symbol_values) for item in value]
    if isinstance(value, dict) and len(value) == 1:
        (tag, payload), = value.items()
        if tag == "tensor":
            return tensor_of(payload)
        if tag == "float":
            return _SPECIAL_FLOATS[payload]
        if tag == "dtype":
            return get_dtype(payload)
        if tag == "sym":
            return evaluate_expression(payload, symbol_values)
    raise ValueError(f"not an encoded argument: {value!r}")


def argument_decoder(value):
    """``decode(tensor_of, symbol_values)`` for an encoded argument, with everything that does not depend
    on the call (constants, dtypes, special floats, the parsing of expressions) worked out once."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return lambda tensor_of, symbol_values: value
    if isinstance(value, list):
        items = [argument_decoder(item) for item in value]
        return lambda tensor_of, symbol_values: [item(tensor_of, symbol_values) for item in items]
    if isinstance(value, dict) and len(value) == 1:
        (tag, payload), = value.items()
        if tag == "tensor":
            return lambda tensor_of, symbol_values: tensor_of(payload)
        if tag in ("float", "dtype"):
            decoded = decode_argument(value, None, {})
            return lambda tensor_of, symbol_values: decoded
        if tag == "sym":
            tree, names = _parsed(payload)
            return lambda tensor_of, symbol_values: _evaluated(payload, tree, names, symbol_values)
    raise ValueError(f"not an encoded argument: {value!r}")


def check_argument(value, symbols, where: str) -> list[str]:
    """Tensor ids an encoded argument refers to; raises ``ValueError`` naming ``where`` on bad encodings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return []
    if isinstance(value, list):
        return [ref for item in value for ref in check_argument(item, symbols, where)]
    if isinstance(value, dict) and len(value) == 1:
        (tag, payload), = value.items()
        if tag == "tensor" and isinstance(payload, str):
            return [payload]
        if tag == "float" and isinstance(payload, str) and payload in _SPECIAL_FLOATS:
            return []
        if tag == "dtype" and isinstance(payload, str) and payload in DTYPE_NAMES:
            return []
        if tag == "sym" and isinstance(payload, str):
            parse_expression(payload, symbols)
            return []
    raise ValueError(f"{where}: not an encoded argument: {value!r} (expected null, bool, int, float, string, list, "
                     f"or an object tagged tensor, float, dtype or sym)")


# ---- reading ---------------------------------------------------------------------------------------
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[^\[\]{}]+")


def json_nesting(text: str) -> int:
    """How deeply ``text``'s arrays and objects nest, counted outside its strings; for a text that is not
    JSON, at least the nesting that a JSON decoder reaches before it fails."""
    brackets = np.frombuffer(_BRACKETS.sub("", _JSON_STRING.sub("", text)).encode("ascii"), np.uint8)
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps).max(initial=0))


def decode_json(data: bytes, source: str):
    """The JSON document in ``data``, read from ``source``; ``GraphError`` naming ``source`` where it is
    not UTF-8 JSON or nests deeper than ``MAX_JSON_NESTING``. The messages quote nothing of ``data``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GraphError(f"{source}: not UTF-8 (at byte {error.start})") from None
    depth = json_nesting(text)
    if depth > MAX_JSON_NESTING:
        raise GraphError(f"{source}: arrays and objects nest {depth} deep, more than the limit of {MAX_JSON_NESTING}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise GraphError(f"{source}: not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    except ValueError as error:  # an integer too long to convert
        raise GraphError(f"{source}: not JSON ({error})") from None


# ---- inline constants -----------------------------------------------------------------------------
def encode_constant(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()).decode("ascii")


def decode_constant(data: str, shape: tuple[int, ...], dtype_name: str) -> np.ndarray:
    element = np.dtype(get_dtype(dtype_name).numpy).newbyteorder("<")
    raw = base64.b64decode(data.encode("ascii"), validate=True)
    expected = math.prod(shape) * element.itemsize
    if len(raw) != expected:
        raise ValueError(f"inline data holds {len(raw)} bytes, the shape {list(shape)} of {dtype_name} needs {expected}")
    return np.frombuffer(raw, dtype=element).astype(element.newbyteorder("=")).reshape(shape)


# ---- writing --------------------------------------------------------------------------------------
def dumps(document: dict) -> str:
    """``document`` as JSON with one tensor and one op per line, so a diff shows what changed."""
    lines = ["{"]
    items = list(document.items())
    for index, (key, value) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        if key in ("tensors", "symbols") and isinstance(value, dict) and value:
            inner = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
            lines.append(f" {json.dumps(key)}: {{\n" + ",\n".join(inner) + f"\n }}{comma}")
        elif key == "ops" and isinstance(value, list) and value:
            inner = [f"  {json.dumps(op)}" for op in value]
            lines.append(f" {json.dumps(key)}: [\n" + ",\n".join(inner) + f"\n ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"
