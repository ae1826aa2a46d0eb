"""Safetensors files that change under the reader or carry hostile bytes: loaded tensors own their
memory, so truncating their file afterwards cannot kill the process (the opt-in memory map can, shown in
a child process); a file truncated between the header and a tensor's read is refused; only the bytes
asked for are read, also by threads sharing one open file; bool bytes other than 0/1 read as True; and
error messages never print the file's text."""
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.io import SafetensorsError, load, load_file, safe_open, save_file
from nbxtensor.io import safetensors as safetensors_module
from tests.conftest import TEST_DEVICE, cpu_kernels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def image(header: dict, buffer: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + buffer


def run_child(code: str, path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (``path`` bound to the file), which a fault kills alone; it computes
    on the CPU device (in a process that found a GPU, CPU tensors run no ops)."""
    script = f"import os, numpy as np, nbxtensor as nbx\npath = {str(path)!r}\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NBX_TEST_DEVICE": "cpu", "NBX_DEVICE": "cpu"})


LOAD_THEN_TRUNCATE = """
values = np.arange(4096, dtype=np.float32)  # four pages of data, none of them still in the header's page
nbx.io.save_file({{"w": nbx.tensor(values), "flags": nbx.tensor(np.ones(5, bool))}}, path)
loaded = nbx.io.load_file(path, device="cpu"{options})
with nbx.io.safe_open(path, framework="numpy"{options}) as file:
    array = file.get_tensor("w")
os.truncate(path, 0)
assert float(loaded["w"].sum().item()) == float(values.sum()), "wrong sum"
assert np.array_equal(loaded["w"].numpy(), values) and np.array_equal(array, values), "wrong values"
assert int(loaded["flags"].sum().item()) == 5
"""


def test_tensors_loaded_by_default_survive_their_file_being_truncated(tmp_path):
    child = run_child(LOAD_THEN_TRUNCATE.format(options=""), tmp_path / "model.safetensors")
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"


@pytest.mark.skipif(sys.platform != "linux", reason="the fault of a truncated mapping is Linux's SIGBUS here")
def test_mmap_option_faults_when_its_file_is_truncated(tmp_path):
    """The documented risk of ``mmap=True``: the tensors view the file's pages, and a truncation takes
    them away, so the next access kills the process."""
    child = run_child(LOAD_THEN_TRUNCATE.format(options=", mmap=True"), tmp_path / "model.safetensors")
    assert child.returncode == -signal.SIGBUS, f"exit {child.returncode}: {child.stderr[-2000:]}"


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_file_truncated_after_its_header_was_read_is_refused(mmap, tmp_path):
    rows = np.arange(24, dtype=np.float32).reshape(4, 6)
    path = tmp_path / "cut.safetensors"
    save_file({"rows": nbx.tensor(rows), "tail": nbx.tensor(np.ones(3, np.int8))}, path)
    with safe_open(path, device=TEST_DEVICE, mmap=mmap) as file:
        rows_start = 8 + struct.unpack("<Q", path.read_bytes()[:8])[0]
        cut = rows_start + 2 * rows[0].nbytes  # the first two rows survive
        os.truncate(path, cut)
        assert np.array_equal(file.get_slice("rows")[:2].numpy(), rows[:2])
        for read in (lambda: file.get_tensor("rows"), lambda: file.get_slice("rows")[2:],
                     lambda: file.get_tensor("tail")):
            with pytest.raises(SafetensorsError, match=f"cut.safetensors: tensor '(rows|tail)' ends at byte "
                                                       f"\\d+, past the end of the file, now {cut} bytes"):
                read()


def test_file_that_ends_while_a_tensor_is_read_is_refused(tmp_path, monkeypatch):
    """A truncation between the size check and the read leaves the read short: refused, not padded."""
    path = tmp_path / "short.safetensors"
    save_file({"w": nbx.tensor(np.arange(16, dtype=np.int32))}, path)
    size = os.path.getsize(path)
    with safe_open(path) as file:
        monkeypatch.setattr(safetensors_module, "_check_file_holds", lambda *args: None)
        os.truncate(path, size - 10)
        with pytest.raises(SafetensorsError, match=f"short.safetensors: tensor 'w' ends at byte {size}, but the "
                                                   f"file ended at byte {size - 10} while it was read"):
            file.get_tensor("w")


def test_only_the_bytes_asked_for_are_read(tmp_path, monkeypatch):
    rows = np.arange(24, dtype=np.float32).reshape(4, 6)
    path = tmp_path / "ranges.safetensors"
    save_file({"rows": nbx.tensor(rows), "other": nbx.tensor(np.ones(1000, np.float64))}, path)
    reads = []
    read = safetensors_module._FileImage.read
    monkeypatch.setattr(safetensors_module._FileImage, "read",
                        lambda self, start, stop, what: reads.append(stop - start) or read(self, start, stop, what))
    with safe_open(path, device=TEST_DEVICE) as file:
        header_reads = list(reads)
        assert len(header_reads) == 2  # the length field, then the header
        assert np.array_equal(file.get_slice("rows")[1:3].numpy(), rows[1:3])
        assert np.array_equal(file.get_slice("rows")[2, 1:4].numpy(), rows[2, 1:4])
        assert np.array_equal(file.get_slice("rows")[::-2, 5].numpy(), rows[::-2, 5])
        assert np.array_equal(file.get_tensor("rows").numpy(), rows)
    # rows 1-2; three elements of row 2; elements 11 (row 1) to 23 (row 3); the whole tensor
    assert reads[len(header_reads):] == [48, 12, 52, 96]


def test_threads_sharing_one_open_file_read_their_own_ranges(tmp_path):
    """Reads seek and read one shared handle; each must get its own range, never another thread's."""
    from concurrent.futures import ThreadPoolExecutor
    tensors = {f"t{i}": np.full((64, 33), i, np.int32) for i in range(8)}
    path = tmp_path / "shared.safetensors"
    save_file({name: nbx.tensor(values) for name, values in tensors.items()}, path)
    with safe_open(path, framework="numpy") as file:
        def read_often(name):
            return all(np.array_equal(file.get_slice(name)[row:row + 3], tensors[name][row:row + 3])
                       and np.array_equal(file.get_tensor(name), tensors[name]) for row in range(61))
        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(read_often, list(tensors) * 8))


def bool_file(raw: bytes) -> bytes:
    return image({"flags": {"dtype": "BOOL", "shape": [len(raw)], "data_offsets": [0, len(raw)]}}, raw)


RAW_FLAGS = bytes([1, 2, 255, 0, 128, 0, 7])
FLAGS = np.frombuffer(RAW_FLAGS, np.uint8) != 0


@cpu_kernels
@pytest.mark.parametrize("source", ["file", "bytes", "numpy", "slice"])
def test_bool_bytes_other_than_0_and_1_read_as_true(source, tmp_path):
    path = tmp_path / "flags.safetensors"
    path.write_bytes(bool_file(RAW_FLAGS))
    if source == "file":
        flags = load_file(path, device=TEST_DEVICE)["flags"]
    elif source == "bytes":
        flags = load(bool_file(RAW_FLAGS), device=TEST_DEVICE)["flags"]
    elif source == "numpy":
        with safe_open(path, framework="numpy") as file:
            flags = nbx.from_numpy(file.get_tensor("flags"))
    else:
        with safe_open(path, device=TEST_DEVICE) as file:
            flags = file.get_slice("flags")[0:4]
    expected = FLAGS[:4] if source == "slice" else FLAGS
    array = flags.numpy()
    assert array.dtype == np.bool_ and np.array_equal(array.view(np.uint8), expected.astype(np.uint8))
    assert int(flags.sum().item()) == int(np.count_nonzero(expected))  # [1, 2, 255, 0] sums to 3
    assert np.array_equal((~flags).numpy(), ~expected)


# ---- messages --------------------------------------------------------------------------------

PASSWD = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
SECRET = "hunter2-secret"


def refusal(data: bytes, tmp_path) -> str:
    """The message refusing ``data``, less the file's path."""
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    with pytest.raises(SafetensorsError) as raised:
        load_file(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    return message[len(f"{path}: "):]


def test_a_text_file_is_refused_without_printing_it(tmp_path):
    message = refusal(PASSWD, tmp_path)
    (length_field,) = struct.unpack("<Q", PASSWD[:8])
    assert "header length field exceeds the limit" in message
    assert "root" not in message and str(length_field) not in message
    # a length field that fits the file: the value is still not printed, the file's size is
    small = struct.pack("<Q", 4000) + PASSWD
    message = refusal(small, tmp_path)
    assert message.endswith(f"the header length field exceeds the file size ({len(small)} bytes); the file is "
                            "truncated or not safetensors")
    assert "4000" not in message


ENTRY = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("header,expected", [
    ({"x": {**ENTRY, "shape": SECRET}}, "shape must be a list of non-negative integers, got a string"),
    ({"x": {**ENTRY, "shape": [2, SECRET, 2.5, True, [1]]}},
     "got [2, a string, a number, a boolean, an array]"),
    ({"x": {**ENTRY, "data_offsets": [0, SECRET]}}, "data_offsets must be a list of two integers, got [0, a string]"),
    ({"x": {**ENTRY, "data_offsets": {SECRET: 1}}}, "got an object"),
    ({"x": {**ENTRY, "data_offsets": [0, 10 ** 40]}}, "data_offsets [0, an integer of more than 64 bits]"),
    ({"x": {**ENTRY, "dtype": [SECRET]}}, "dtype must be a string, got an array"),
    ({"x": {**ENTRY, SECRET: 1}}, "unexpected 'hunter2-secret'"),
    ({"x": SECRET}, "the entry must be an object, got a string"),
    ({"__metadata__": SECRET}, "__metadata__ must be an object of strings, got a string"),
    ({"__metadata__": {"k": [SECRET]}}, "__metadata__ value for 'k' must be a string, got an array"),
])
def test_header_values_are_described_not_printed(header, expected, tmp_path):
    message = refusal(image(header, b"\0" * 8), tmp_path)
    assert expected in message
    if SECRET not in expected:
        assert SECRET not in message


@pytest.mark.parametrize("text,expected", [
    (f'["{SECRET}"]'.encode(), "the header must be a JSON object, got an array"),
    (f'{{"x": {SECRET}}}'.encode(), "the header is not valid JSON (Expecting value at character 6)"),
    (b'{"x": "' + SECRET.encode() + b'\xff"}', "the header is not valid UTF-8 (at byte 21)"),
])
def test_header_text_is_not_printed(text, expected, tmp_path):
    message = refusal(struct.pack("<Q", len(text)) + text, tmp_path)
    assert expected in message and SECRET not in message


def test_names_from_the_header_are_escaped_and_cut(tmp_path):
    name = "\x1b[31m" + "n" * 500
    message = refusal(image({name: {**ENTRY, "dtype": "Z" * 500}}, b"\0" * 8), tmp_path)
    assert "\x1b" not in message and "n" * 61 not in message and "Z" * 61 not in message
    assert "tensor '\\x1b[31mnnn" in message and "unknown dtype 'ZZZ" in message
