"""Property-based fuzzing of the safetensors reader. Valid files, built here independently of the writer,
are mutated (bytes flipped, cut or appended, the header length field changed, the header JSON edited:
offsets out of range, overlapping or negative, fields of the wrong type, unknown dtypes, shapes whose
element count overflows, duplicate keys, metadata of the wrong type) and handed to ``load`` (bytes),
``load_file`` and ``safe_open`` (read and memory-mapped). Every reader must refuse with the same
SafetensorsError or accept with every tensor holding exactly the bytes of its range of the file (bool
bytes as 0/1 where the reader copies). Slices must match NumPy's indexing of the whole tensor."""
import json
import math
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import basic_indices

import nbxtensor as nbx
from nbxtensor.dtypes import from_safetensors_code
from nbxtensor.io import SafetensorsError, load, load_file, safe_open

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORABLE = [d for d in nbx.all_dtypes if d.safetensors]
CODES = sorted(d.safetensors for d in STORABLE)
ITEMSIZE = {d.safetensors: d.itemsize for d in STORABLE}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "fuzzed.safetensors"


@st.composite
def valid_files(draw) -> tuple[dict, bytes]:
    """(header, data buffer) of a valid file: entries in any order, their data packed in another."""
    names = draw(st.lists(st.text(min_size=1, max_size=4), max_size=4, unique=True))
    entries = {name: (draw(st.sampled_from(CODES)), draw(st.lists(st.integers(0, 3), max_size=3))) for name in names}
    header, buffer = {}, b""
    for name in draw(st.permutations(names)):
        code, shape = entries[name]
        size = math.prod(shape) * ITEMSIZE[code]
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(buffer), len(buffer) + size]}
        buffer += draw(st.binary(min_size=size, max_size=size))
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2))
    return header, buffer


def encode(header: dict, buffer: bytes, padding: int = 0) -> bytes:
    text = json.dumps(header).encode() + b" " * padding
    return struct.pack("<Q", len(text)) + text + buffer


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                        max_size=2), max_leaves=6)
offsets_near = st.integers(-16, 64) | st.integers(-2 ** 64, 2 ** 64)


def edit_header(draw, header: dict, buffer_length: int) -> tuple[dict, str]:
    """One edit of the header JSON; returns the header and text to splice before its closing brace."""
    names = [n for n, entry in header.items() if n != "__metadata__" and isinstance(entry, dict)]
    edit = draw(st.sampled_from(["out_of_range", "overlap", "negative", "wrong_type", "dtype", "overflow",
                                 "duplicate", "metadata", "metadata_value", "document"]))
    if edit == "document":
        return draw(json_values), ""
    if edit == "metadata":
        header["__metadata__"] = draw(json_values)
        return header, ""
    if edit == "metadata_value":
        header["__metadata__"] = {"k": draw(json_values)}
        return header, ""
    if not names:
        names = [draw(st.text(min_size=1, max_size=4))]
        header[names[0]] = {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}
    name = draw(st.sampled_from(names))
    entry = header[name]
    if edit == "out_of_range":
        entry["data_offsets"] = [draw(offsets_near), buffer_length + draw(st.integers(1, 2 ** 70))]
    elif edit == "overlap":
        entry["data_offsets"] = header[draw(st.sampled_from(names))].get("data_offsets")
    elif edit == "negative":
        entry["data_offsets"] = [-draw(st.integers(1, 2 ** 64)), draw(offsets_near)]
    elif edit == "wrong_type":
        entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(json_values)
    elif edit == "dtype":
        entry["dtype"] = draw(st.sampled_from(CODES + ["bool", "F32 ", "Q8", "", "F8_E4M3FNUZ"]))
    elif edit == "overflow":  # element counts past 64 bits, also in a tensor of no elements that fits anywhere
        shape = draw(st.sampled_from([[2 ** 32] * 3, [2 ** 63, 2 ** 63], [2 ** 64, 0], [0, 2 ** 62, 2 ** 62],
                                      [2 ** 61, 0, 8], [0, 2 ** 63 - 1]]))
        if math.prod(shape):
            entry["shape"] = shape
        else:
            header[f"overflow {name}"] = {"dtype": draw(st.sampled_from(CODES)), "shape": shape,
                                          "data_offsets": [buffer_length, buffer_length]}
    else:  # the same name again, spliced into the text (a dict cannot hold it twice)
        return header, f", {json.dumps(name)}: {json.dumps(entry)}"
    return header, ""


@st.composite
def mutated_files(draw) -> bytes:
    header, buffer = draw(valid_files())
    data = encode(header, buffer, draw(st.integers(0, 7)))
    # mostly one mutation, so that each reaches the checks it aims at; header edits most often
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        mutation = draw(st.sampled_from(["none", "flip", "flip", "cut", "append", "length"] + ["header"] * 6))
        if mutation == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
        elif mutation == "cut":
            data = data[:draw(st.integers(0, len(data)))]
        elif mutation == "append":
            data += draw(st.binary(min_size=1, max_size=16))
        elif mutation == "length" and len(data) >= 8:
            (length,) = struct.unpack("<Q", data[:8])
            changed = draw(st.integers(0, 2 ** 64 - 1) | st.integers(max(0, length - 16), length + 16))
            data = struct.pack("<Q", changed) + data[8:]
        elif mutation == "header":
            try:
                (length,) = struct.unpack("<Q", data[:8])
                parsed = json.loads(data[8:8 + length])
            except (struct.error, ValueError):
                continue  # an earlier mutation already broke the header
            if not isinstance(parsed, dict):
                continue
            rest = data[8 + length:]
            edited, splice = edit_header(draw, parsed, len(rest))
            text = json.dumps(edited)
            if splice and text.endswith("}"):
                text = text[:-1] + splice + "}"
            text = text.encode()
            data = struct.pack("<Q", len(text)) + text + rest
    return data


def read_bytes(data: bytes, path) -> dict:
    return {name: tensor.numpy() for name, tensor in load(data, device="cpu").items()}


def read_file(data: bytes, path) -> dict:
    return {name: tensor.numpy() for name, tensor in load_file(path, device="cpu").items()}


def read_arrays(data: bytes, path, mmap: bool = False) -> dict:
    with safe_open(path, framework="numpy", mmap=mmap) as file:
        return {name: np.array(file.get_tensor(name)) for name in file.keys()}


def read_mapped(data: bytes, path) -> dict:
    return read_arrays(data, path, mmap=True)


def read_slices(data: bytes, path) -> dict:
    with safe_open(path, device="cpu") as file:
        return {name: file.get_slice(name)[...].numpy() for name in file.keys()}


READERS = {"load": read_bytes, "load_file": read_file, "numpy": read_arrays, "mmap": read_mapped,
           "slices": read_slices}
COPYING = {"load", "load_file", "numpy", "slices"}  # these normalise bool bytes; the mapping shows them as stored


def check_readers_agree(data: bytes, path) -> None:
    path.write_bytes(data)
    outcomes = {}
    for reader_name, read in READERS.items():
        try:
            outcomes[reader_name] = read(data, path)
        except SafetensorsError as error:
            source = "<bytes>" if reader_name == "load" else str(path)
            message = str(error)
            assert message.startswith(f"{source}: "), message
            outcomes[reader_name] = message[len(source) + 2:]
    refused = {name for name, outcome in outcomes.items() if isinstance(outcome, str)}
    assert refused in (set(), set(READERS)), f"only {sorted(refused)} refused: {outcomes}"
    if refused:
        assert len({outcomes[name] for name in refused}) == 1, outcomes
        return
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    start = 8 + length
    for reader_name, tensors in outcomes.items():
        assert sorted(tensors) == sorted(header)
        for name, entry in header.items():
            array = tensors[name]
            begin, end = entry["data_offsets"]
            expected = data[start + begin:start + end]
            if entry["dtype"] == "BOOL" and reader_name in COPYING:
                expected = bytes(byte != 0 for byte in expected)
            assert array.shape == tuple(entry["shape"]) and nbx.get_dtype(array.dtype).safetensors == entry["dtype"]
            assert np.ascontiguousarray(array).tobytes() == expected, (reader_name, name)


@FUZZ
@given(mutated_files())
def test_fuzz_mutated_files_are_refused_or_read_exactly(scratch, data):
    check_readers_agree(data, scratch)


@settings(max_examples=50, deadline=None)
@given(valid_files(), st.integers(0, 7))
def test_fuzz_valid_files_are_read_exactly(scratch, file, padding):
    header, buffer = file
    data = encode(header, buffer, padding)
    check_readers_agree(data, scratch)
    assert len(read_bytes(data, scratch)) == len(header) - ("__metadata__" in header)


@st.composite
def sliced_tensors(draw):
    code = draw(st.sampled_from(CODES))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=3)))
    raw = draw(st.binary(min_size=math.prod(shape) * ITEMSIZE[code], max_size=math.prod(shape) * ITEMSIZE[code]))
    index = draw(basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return code, shape, raw, index


@settings(max_examples=100, deadline=None)
@given(sliced_tensors(), st.booleans())
def test_fuzz_slices_match_numpy_indexing(scratch, tensor, mmap):
    code, shape, raw, index = tensor
    scratch.write_bytes(encode({"t": {"dtype": code, "shape": list(shape), "data_offsets": [0, len(raw)]}}, raw))
    dt = from_safetensors_code(code)
    stored = np.frombuffer(raw, np.uint8)
    if code == "BOOL" and not mmap:
        stored = (stored != 0).astype(np.uint8)
    whole = stored.view(dt.numpy).reshape(shape)
    index = index if isinstance(index, tuple) else (index,)
    expected = whole[index + ((Ellipsis,) if Ellipsis not in index else ())]
    with safe_open(scratch, framework="numpy", mmap=mmap) as file:
        got = file.get_slice("t")[index]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()


def test_gathering_index_reads_the_tensor_then_indexes_it(tmp_path):
    values = np.arange(12, dtype=np.int16).reshape(3, 4)
    path = tmp_path / "gather.safetensors"
    path.write_bytes(encode({"t": {"dtype": "I16", "shape": [3, 4], "data_offsets": [0, 24]}}, values.tobytes()))
    with safe_open(path) as file:
        piece = file.get_slice("t")
        assert np.array_equal(piece[[2, 0], 1:3].numpy(), values[[2, 0], 1:3])
        assert np.array_equal(piece[values % 2 == 0].numpy(), values[values % 2 == 0])
