"""Hostile model directories (no torch): every file the loader reads lies inside the directory, and
every malformed entry is refused with a GraphError that names it, before anything is allocated or run;
the fuzz at the end mutates a valid directory at random and holds the loader to the same."""
import json
import os
import re
import struct
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import nbxtensor as nbx
from nbxtensor import graph
from nbxtensor.graph import GraphError
from nbxtensor.graph.format import MAX_EXPRESSION_CHARS, MAX_JSON_NESTING, evaluate_expression
from nbxtensor.io import save_file

from .test_graph import BIAS, WEIGHT, _mlp_document, _write

# Weights of the right names and shapes, kept outside every model directory: a load that used them
# would run without an error, so each test that points at them checks that the load is refused.
FOREIGN = 999.0


def _foreign_weights(directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.safetensors")
    save_file({"fc.weight": nbx.tensor(np.full((3, 4), FOREIGN, np.float32)),
               "fc.bias": nbx.tensor(np.full((3,), FOREIGN, np.float32))}, path)
    return path


def _with_index(directory, weight_map, document=None, index_name="model.safetensors.index.json"):
    """A model directory whose weights are in ``shard.safetensors``, listed by an index holding ``weight_map``."""
    _write(directory, document)
    os.rename(os.path.join(directory, "model.safetensors"), os.path.join(directory, "shard.safetensors"))
    with open(os.path.join(directory, index_name), "w") as file:
        json.dump({"weight_map": weight_map}, file)
    return directory


def _refused(directory, match):
    with pytest.raises(GraphError, match=match) as error:
        graph.load(directory)
    return str(error.value)


# ---- files outside the directory --------------------------------------------------------------------
@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_a_weight_map_entry_leading_outside_the_directory_is_refused(tmp_path, how):
    foreign = _foreign_weights(tmp_path / "elsewhere")
    name = "../elsewhere/model.safetensors" if how == "relative" else foreign
    model = _with_index(tmp_path / "model", {"fc.weight": name, "fc.bias": "shard.safetensors"})
    _refused(model, r"weight_map\['fc.weight'\]: .* leads outside the model directory")


def test_a_weight_map_entry_naming_a_system_file_quotes_none_of_its_bytes(tmp_path):
    model = _with_index(tmp_path / "model", {"fc.weight": "/etc/passwd", "fc.bias": "shard.safetensors"})
    message = _refused(model, r"weight_map\['fc.weight'\]: '/etc/passwd' leads outside")
    assert "header length" not in message


def test_a_symlink_leading_outside_the_directory_is_refused(tmp_path):
    foreign = _foreign_weights(tmp_path / "elsewhere")
    model = _write(tmp_path / "model")
    os.remove(os.path.join(model, "model.safetensors"))
    os.symlink(foreign, os.path.join(model, "model.safetensors"))
    _refused(model, r"weights file: 'model.safetensors' leads outside the model directory")
    indexed = _with_index(tmp_path / "indexed", {"fc.weight": "link.safetensors", "fc.bias": "shard.safetensors"})
    os.symlink(foreign, os.path.join(indexed, "link.safetensors"))
    _refused(indexed, r"weight_map\['fc.weight'\]: 'link.safetensors' leads outside")


def test_a_symlink_inside_the_directory_is_followed(tmp_path):
    model = _write(tmp_path / "model")
    os.rename(os.path.join(model, "model.safetensors"), os.path.join(model, "blob"))
    os.symlink("blob", os.path.join(model, "model.safetensors"))
    loaded = graph.load(model)
    np.testing.assert_array_equal(loaded.weights["param::fc.weight"].numpy(), WEIGHT)


def test_a_graph_file_leading_outside_the_directory_is_refused(tmp_path):
    elsewhere = _write(tmp_path / "elsewhere")
    model = tmp_path / "model"
    model.mkdir()
    os.symlink(os.path.join(elsewhere, "graph.json"), model / "graph.json")
    _refused(model, r"graph file: 'graph.json' leads outside the model directory")


@pytest.mark.parametrize("index_name", ["../elsewhere/model.safetensors.index.json", "/etc/passwd"])
def test_a_weights_index_leading_outside_the_directory_is_refused(tmp_path, index_name):
    _with_index(tmp_path / "elsewhere", {"fc.weight": "shard.safetensors", "fc.bias": "shard.safetensors"})
    document = _mlp_document()
    document["weights_index"] = index_name
    _refused(_write(tmp_path / "model", document), r"weights_index: .* leads outside the model directory")


@pytest.mark.parametrize("index_name,match", [
    (5, "weights_index: expected a file name, got int"),
    ("", "weights_index: expected a file name"),
    ("absent.json", "weights_index: 'absent.json' does not exist"),
    ("nul\0.json", "weights_index: .* cannot be opened"),
])
def test_a_weights_index_that_names_no_file_is_refused(tmp_path, index_name, match):
    document = _mlp_document()
    document["weights_index"] = index_name
    _refused(_write(tmp_path, document), match)


def test_a_weights_index_named_by_the_document_is_read(tmp_path):
    document = _mlp_document()
    document["weights_index"] = "shards.json"
    model = _with_index(tmp_path, {"fc.weight": "shard.safetensors", "fc.bias": "shard.safetensors"}, document,
                        index_name="shards.json")
    np.testing.assert_array_equal(graph.load(model).weights["param::fc.bias"].numpy(), BIAS)


# ---- files that are not what their names say ---------------------------------------------------------
def test_safetensors_header_messages_quote_none_of_the_files_bytes(tmp_path):
    model = _write(tmp_path)
    content = b"root:x:0:0:root:/root:/bin/bash\n"
    with open(os.path.join(model, "model.safetensors"), "wb") as file:
        file.write(content)
    message = _refused(model, "exceeds the limit")
    assert str(struct.unpack("<Q", content[:8])[0]) not in message
    with open(os.path.join(model, "model.safetensors"), "wb") as file:
        file.write(struct.pack("<Q", 0x7a79) + b"{}")
    message = _refused(model, "exceeds the file size")
    assert str(0x7a79) not in message


def test_a_directory_named_like_a_weight_file_is_refused(tmp_path):
    model = _write(tmp_path / "model")
    os.remove(os.path.join(model, "model.safetensors"))
    os.mkdir(os.path.join(model, "model.safetensors"))
    _refused(model, "weights file: 'model.safetensors' is not a regular file")
    indexed = _with_index(tmp_path / "indexed", {"fc.weight": "folder.safetensors", "fc.bias": "shard.safetensors"})
    os.mkdir(os.path.join(indexed, "folder.safetensors"))
    _refused(indexed, r"weight_map\['fc.weight'\]: 'folder.safetensors' is not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_rather_than_read(tmp_path):
    model = _write(tmp_path / "model")
    os.remove(os.path.join(model, "model.safetensors"))
    os.mkfifo(os.path.join(model, "model.safetensors"))
    _refused(model, "weights file: 'model.safetensors' is not a regular file")
    fifo_graph = tmp_path / "fifo_graph"
    fifo_graph.mkdir()
    os.mkfifo(fifo_graph / "graph.json")
    _refused(fifo_graph, "graph file: 'graph.json' is not a regular file")


@pytest.mark.parametrize("index,match", [
    ({"weight_map": ["shard.safetensors"]}, "weight_map: expected an object .* got list"),
    ({"weight_map": "shard.safetensors"}, "weight_map: expected an object .* got str"),
    ({"weight_map": None}, "weight_map: expected an object .* got NoneType"),
    ({}, "weight_map: expected an object .* got NoneType"),
    ([], "weight_map: expected an object .* got NoneType"),
    ({"weight_map": {"fc.weight": 3, "fc.bias": "shard.safetensors"}},
     r"weight_map\['fc.weight'\]: expected a file name, got int"),
    ({"weight_map": {"fc.weight": ["shard.safetensors"], "fc.bias": "shard.safetensors"}},
     r"weight_map\['fc.weight'\]: expected a file name, got list"),
])
def test_a_weight_map_of_the_wrong_json_type_is_refused(tmp_path, index, match):
    model = _with_index(tmp_path, {})
    with open(os.path.join(model, "model.safetensors.index.json"), "w") as file:
        json.dump(index, file)
    _refused(model, match)


# ---- JSON documents ----------------------------------------------------------------------------------
def _write_text(directory, text):
    _write(directory)
    with open(os.path.join(directory, "graph.json"), "w") as file:
        file.write(text)
    return directory


def test_a_deeply_nested_graph_file_is_refused_before_decoding(tmp_path):
    _refused(_write_text(tmp_path, "[" * 100_000 + "]" * 100_000), "nest 100000 deep, more than the limit of 64")


def test_a_deeply_nested_argument_is_refused(tmp_path):
    """Deep enough for the argument checks' recursion, well inside what the JSON decoder takes."""
    document = _mlp_document()
    document["ops"][2]["kwargs"]["deep"] = "NESTED"
    text = json.dumps(document).replace('"NESTED"', "[" * 900 + "0" + "]" * 900)
    _refused(_write_text(tmp_path, text), "nest 904 deep")


def test_nesting_up_to_the_limit_is_read(tmp_path):
    document = _mlp_document()
    document["padding"] = "NESTED"
    depth = MAX_JSON_NESTING - 1  # the document's own object is the first level
    graph.load(_write_text(tmp_path, json.dumps(document).replace('"NESTED"', "[" * depth + "]" * depth)))


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path):
    document = _mlp_document()
    document["note"] = '[{"\\' + "[" * 1000
    graph.load(_write_text(tmp_path, json.dumps(document)))


def test_a_graph_file_that_is_not_utf8_is_refused_without_quoting_it(tmp_path):
    model = _write(tmp_path)
    with open(os.path.join(model, "graph.json"), "wb") as file:
        file.write(b'{"format": "\xfe\xff"}')
    message = _refused(model, r"not UTF-8 \(at byte 12\)")
    assert "0xfe" not in message


def test_an_integer_too_long_to_convert_is_refused(tmp_path):
    document = _mlp_document()
    document["version"] = "LONG"
    _refused(_write_text(tmp_path, json.dumps(document).replace('"LONG"', "9" * 5000)), "not JSON")


def test_an_index_nested_too_deeply_is_refused(tmp_path):
    model = _with_index(tmp_path, {})
    with open(os.path.join(model, "model.safetensors.index.json"), "w") as file:
        file.write('{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(model, r"model.safetensors.index.json: arrays and objects nest 100001 deep")


# ---- symbols and shape expressions --------------------------------------------------------------------
def test_a_symbol_no_input_dimension_binds_is_refused(tmp_path):
    document = _mlp_document()
    document["symbols"]["s1"] = {"min": 1, "max": 4, "trace": 2}
    document["tensors"]["relu"]["shape"] = ["s0", "s1 + 1"]
    _refused(_write(tmp_path, document), "symbol 's1': no input dimension binds it")


def test_a_plan_for_values_that_miss_a_symbol_is_refused(tmp_path):
    model = graph.load(_write(tmp_path))
    with pytest.raises(GraphError, match="symbol 's0' has no value"):
        model.plan({})


@pytest.mark.parametrize("expression", ["s0 // 0", "s0 % 0", "(s0 + 1) // (0)"])
def test_a_literal_zero_divisor_is_refused_at_load(tmp_path, expression):
    document = _mlp_document()
    document["tensors"]["relu"]["shape"] = ["s0", expression]
    _refused(_write(tmp_path, document), re.escape(f"tensor 'relu': shape expression {expression!r} divides by zero"))


@pytest.mark.parametrize("operator", ["//", "%"])
def test_a_divisor_that_is_zero_for_the_values_names_the_tensor(tmp_path, operator):
    document = _mlp_document()
    document["tensors"]["relu"]["shape"] = ["s0", f"3 {operator} (s0 - 2)"]
    model = graph.load(_write(tmp_path, document))
    with pytest.raises(GraphError, match=r"tensor 'relu': shape expression .* divides by zero for s0=2"):
        model.plan({"s0": 2})


def test_a_symbolic_argument_dividing_by_zero_names_the_op(tmp_path):
    document = _mlp_document()
    document["ops"][1]["kwargs"]["alpha"] = {"sym": "1 // (s0 - 2)"}
    model = graph.load(_write(tmp_path, document))
    with pytest.raises(GraphError, match=r"op 'sub' \(aten::sub.Tensor\): shape expression .* divides by zero"):
        model.plan({"s0": 2})


@pytest.mark.parametrize("expression,match", [
    ("+".join(["s0"] * 200_000), f"of 599999 characters is longer than the limit of {MAX_EXPRESSION_CHARS}"),
    ("-" * 990 + "s0", "levels deep, more than the limit"),
    ("+".join(["s0"] * 300), "levels deep, more than the limit"),
])
def test_an_overlong_shape_expression_is_refused(tmp_path, expression, match):
    document = _mlp_document()
    document["tensors"]["relu"]["shape"] = ["s0", expression]
    _refused(_write(tmp_path, document), "tensor 'relu': shape expression .*" + match)


@pytest.mark.parametrize("expression,match", [
    ("max(s0, 1)", "calls something other than Max or Min"),
    ("Max(s0)", "calls something other than Max or Min of two or more"),
    ("Max(s0, key=1)", "calls something other than Max or Min"),
    ("__import__('os')", "calls something other than Max or Min"),
    ("s0.real", "holds Attribute, not arithmetic"),
])
def test_a_call_other_than_max_or_min_is_refused(tmp_path, expression, match):
    document = _mlp_document()
    document["tensors"]["relu"]["shape"] = ["s0", expression]
    _refused(_write(tmp_path, document), "tensor 'relu': shape expression .*" + re.escape(match))


def test_max_and_min_of_expressions_size_a_tensor(tmp_path):
    """torch.export writes Max(...) where a slice may come out empty (MPT's ALiBi biases: Max(0, 1 - seq)); the
    loader evaluates Max and Min of any two or more expressions."""
    assert evaluate_expression("Max(0, 3 - s0) + Min(s0 * 4, 7, 100) + 1", {"s0": 2}) == 1 + 7 + 1
    assert evaluate_expression("Max(0, 3 - s0)", {"s0": 5}) == 0
    document = _mlp_document()
    document["tensors"]["relu"]["shape"] = ["s0", "Max(3, s0 - 100) + Min(0, s0 - 1)"]  # 3 for every s0 >= 1
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = graph.load(_write(tmp_path / "plain"))(x).numpy()
    assert graph.load(_write(tmp_path / "max_min", document))(x).numpy().tobytes() == want.tobytes()


def test_a_symbol_with_a_negative_minimum_is_refused(tmp_path):
    document = _mlp_document()
    document["symbols"]["s0"]["min"] = -1
    _refused(_write(tmp_path, document), "symbol 's0': min -1 is negative")


def test_a_shape_expression_negative_for_the_values_is_refused(tmp_path):
    document = _mlp_document()
    document["tensors"]["relu"]["shape"] = ["s0", "s0 - 3"]
    model = graph.load(_write(tmp_path, document))
    with pytest.raises(GraphError, match=r"tensor 'relu': shape \['s0', 's0 - 3'\] is \[2, -1\] for"):
        model.plan({"s0": 2})


# ---- values of the wrong JSON type --------------------------------------------------------------------
@pytest.mark.parametrize("where,value,match", [
    ("dtype", ["float32"], "tensor 'linear': dtype \\['float32'\\] is not one of"),
    ("float", ["inf"], "not an encoded argument"),
    ("dtype_tag", {"a": 1}, "not an encoded argument"),
])
def test_an_unhashable_value_where_a_name_belongs_is_refused(tmp_path, where, value, match):
    document = _mlp_document()
    if where == "dtype":
        document["tensors"]["linear"]["dtype"] = value
    else:
        document["ops"][1]["kwargs"]["alpha"] = {"float" if where == "float" else "dtype": value}
    _refused(_write(tmp_path, document), match)


def test_arguments_too_few_for_an_adapted_overload_name_the_op(tmp_path):
    document = _mlp_document()
    document["tensors"]["soft"] = {"shape": ["s0", 3], "dtype": "float32"}
    document["ops"].append({"id": "soft", "op": "aten::_softmax.default", "args": [{"tensor": "relu"}],
                            "kwargs": {}, "outputs": ["soft"]})
    document["outputs"] = ["soft"]
    model = graph.load(_write(tmp_path, document))
    with pytest.raises(GraphError, match=r"op 'soft' \(aten::_softmax.default\): the arguments do not fit"):
        model.plan()


# ---- sizes --------------------------------------------------------------------------------------------
def _zeros_document(*shapes):
    """The MLP with extra outputs made by ``aten::zeros`` of the given shapes."""
    document = _mlp_document()
    for index, shape in enumerate(shapes):
        name = f"zeros_{index}"
        document["tensors"][name] = {"shape": list(shape), "dtype": "float32"}
        document["ops"].append({"id": name, "op": "aten::zeros.default", "args": [list(shape)], "kwargs": {},
                                "outputs": [name]})
        document["outputs"].append(name)
    return document


def test_a_tensor_too_large_to_address_is_refused_before_allocating(tmp_path, monkeypatch):
    model = graph.load(_write(tmp_path, _zeros_document((2 ** 40, 2 ** 40))))
    with pytest.raises(GraphError, match=r"tensor 'zeros_0': float32\[1099511627776, 1099511627776\] takes"):
        model.plan()
    monkeypatch.setattr("nbxtensor.graph.graph.ArenaRun", None)  # the run must stop before the arena
    with pytest.raises(GraphError, match="tensor 'zeros_0'"):
        model(np.zeros((2, 4), np.float32))


def test_an_arena_too_large_to_address_is_refused(tmp_path):
    model = graph.load(_write(tmp_path, _zeros_document(*[(2 ** 60,)] * 3)))  # three of 2**62 bytes, all live
    with pytest.raises(GraphError, match=r"needs \d+ bytes at its peak \(its arena\)"):
        model.plan()


def test_a_symbol_value_too_large_is_refused(tmp_path):
    document = _mlp_document()
    document["symbols"]["s0"]["max"] = None
    model = graph.load(_write(tmp_path, document))
    with pytest.raises(GraphError, match=r"tensor 'input::x': float32\[4611686018427387904, 4\] takes"):
        model.plan({"s0": 2 ** 62})


# ---- fuzz ---------------------------------------------------------------------------------------------
# Every file the process opens while the fuzz loads, recorded by an audit hook (hooks stay for the
# process, so it records only while ``_OPENED`` is a list).
_OPENED = None


def _record_open(event, args):
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_record_open)

_HOSTILE_STRINGS = ["../elsewhere/model.safetensors", "ELSEWHERE", "/etc/passwd", "shard.safetensors",
                    "model.safetensors", "folder.safetensors", ".", "", "s0", "s1", "s0 // 0", "3 % (s0 - 2)",
                    "-" * 200 + "s0", "9" * 40, "input::x", "param::fc.weight", "linear", "aten::relu.default",
                    "float32", "int64", "fc.weight"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.integers(), st.just(2 ** 70),
                     st.floats(allow_nan=False), st.sampled_from(_HOSTILE_STRINGS), st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["tensor", "sym", "float", "dtype", "x"]), inner,
                                                 max_size=2)), max_leaves=6)


def _paths(node, prefix=()):
    """The path (keys and indices) of every value inside ``node``, walked without recursion."""
    found, pending = [], [(node, prefix)]
    while pending:
        value, path = pending.pop()
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            found.append(path + (key,))
            pending.append((child, path + (key,)))
    return found


@st.composite
def _mutated(draw, document):
    """``document`` after a few random edits: a value replaced by another of any JSON type or by a copy
    of another value of the document (plausible, but in the wrong place), deleted, or buried under many
    lists."""
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(document)
        if not paths:
            break
        path = paths[draw(st.integers(0, len(paths) - 1))]
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "copy", "delete", "bury"]))
        if action == "replace":
            parent[path[-1]] = draw(_VALUES)
        elif action == "copy":
            source = document
            for key in paths[draw(st.integers(0, len(paths) - 1))]:
                source = source[key]
            parent[path[-1]] = json.loads(json.dumps(source))
        elif action == "delete":
            del parent[path[-1]]
        else:
            buried = parent[path[-1]]
            for _ in range(draw(st.sampled_from([2, MAX_JSON_NESTING, 500]))):
                buried = [buried]
            parent[path[-1]] = buried
    return document


@st.composite
def _text_edits(draw, text):
    """``text`` with bytes flipped, brackets inserted, or cut short."""
    data = bytearray(text.encode("utf-8"))
    for _ in range(draw(st.sampled_from([0, 0, 1, 3]))):
        position = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(["flip", "brackets", "truncate"]))
        if edit == "flip":
            data[position] = draw(st.integers(0, 255))
        elif edit == "brackets":
            data[position:position] = draw(st.sampled_from([b"[", b"{", b"]", b"}", b'"'])) * draw(st.integers(1, 300))
        else:
            del data[position:]
            break
    return bytes(data)


def _encode(document, elsewhere):
    return json.dumps(document).replace('"ELSEWHERE"', json.dumps(elsewhere))


def _load_and_plan(directory, elsewhere):
    """Load and plan ``directory``: anything but a GraphError, a read outside it, or a weight from
    elsewhere fails the test."""
    global _OPENED
    _OPENED = []
    try:
        loaded = graph.load(directory)
        loaded.plan()
    except GraphError:
        loaded = None
    finally:
        opened, _OPENED = _OPENED, None
    root = os.path.realpath(directory)
    outside = [path for path in opened if path.startswith((os.path.realpath(elsewhere), "/etc/"))]
    assert not outside, f"read outside {root}: {outside}"
    if loaded is not None:
        assert all(not np.any(w.numpy() == FOREIGN) for w in loaded.weights.values())


_FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fuzz_directories(base):
    """A valid model directory with an index, a folder and a foreign checkpoint beside it."""
    elsewhere = os.path.dirname(_foreign_weights(os.path.join(base, "elsewhere")))
    model = _with_index(os.path.join(base, "model"), {"fc.weight": "shard.safetensors",
                                                      "fc.bias": "shard.safetensors"})
    os.mkdir(os.path.join(model, "folder.safetensors"))
    return model, elsewhere


@_FUZZ
@given(st.data())
def test_fuzz_mutated_graph_files_load_or_raise_graph_error(data):
    with tempfile.TemporaryDirectory() as base:
        model, elsewhere = _fuzz_directories(base)
        text = _encode(data.draw(_mutated(_mlp_document())), os.path.join(elsewhere, "model.safetensors"))
        with open(os.path.join(model, "graph.json"), "wb") as file:
            file.write(data.draw(_text_edits(text)))
        _load_and_plan(model, elsewhere)


@_FUZZ
@given(st.data())
def test_fuzz_mutated_indexes_load_or_raise_graph_error(data):
    with tempfile.TemporaryDirectory() as base:
        model, elsewhere = _fuzz_directories(base)
        index = data.draw(_mutated({"weight_map": {"fc.weight": "shard.safetensors", "fc.bias": "shard.safetensors"},
                                    "metadata": {"total_size": 60}}))
        text = _encode(index, os.path.join(elsewhere, "model.safetensors"))
        with open(os.path.join(model, "model.safetensors.index.json"), "wb") as file:
            file.write(data.draw(_text_edits(text)))
        _load_and_plan(model, elsewhere)
