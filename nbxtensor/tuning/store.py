"""The tuning store in one file, so that tuned and certified settings ship beside a model.

``export_store(path)`` writes every device class's entries (or the named classes'); ``import_store(path)``
merges a file's entries into this machine's store. An imported file is hostile input: its size is
bounded, its schema checked field by field, and an error names the file and the position of the
problem, never the file's content.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from .cache import STORE_FORMAT, STORE_VERSION, cache_for, tuning_dir

__all__ = ["StoreFileError", "export_store", "import_store", "MAX_STORE_BYTES"]

MAX_STORE_BYTES = 64 * 2 ** 20
MAX_ENTRIES = 200_000
MAX_CONFIG_ITEMS = 64
MAX_REFUSED = 1024
MAX_TEXT = 1000
MAX_SETTING = 1 << 16  # tiles, warps, stages, splits: far below this; a larger value would only exhaust a launch
# a device class names a file of the store: no separators, no leading dot
_CLASS_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_VERSION_NAMES = ("nbxtensor", "triton", "driver")


class StoreFileError(ValueError):
    """A tuning store file that cannot be read or imported; the message names the problem, not the content."""


def export_store(path, classes=None) -> int:
    """Write the entries of ``classes`` (default: every device class in the store) to ``path``; the count of
    entries written."""
    names = sorted(classes) if classes is not None else sorted(p.stem for p in tuning_dir().glob("*.json")
                                                              if _CLASS_NAME.fullmatch(p.stem))
    stores = {}
    for name in names:
        if not _CLASS_NAME.fullmatch(name):
            raise ValueError(f"device class {name!r}: expected letters, digits, '_', '.' or '-'")
        entries = cache_for(name).entries()
        if entries:
            stores[name] = entries
    document = {"format": STORE_FORMAT, "version": STORE_VERSION, "stores": stores}
    _check(document, str(path))  # a store that would not import is not written
    temporary = Path(f"{path}.{os.getpid()}.tmp")
    with open(temporary, "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
    os.replace(temporary, path)
    return sum(len(entries) for entries in stores.values())


def import_store(path) -> dict:
    """Merge the entries of the store file ``path`` into this machine's store (an entry of the file replaces
    this store's entry of the same key); device class -> count of entries imported."""
    document = _load(str(path))
    _check(document, str(path))
    for name, entries in document["stores"].items():
        cache_for(name).merge(entries)
    return {name: len(entries) for name, entries in document["stores"].items()}


def _load(where: str):
    try:
        size = os.stat(where).st_size
    except OSError as error:
        raise StoreFileError(f"tuning store file {where}: cannot be read ({error.strerror})") from None
    if size > MAX_STORE_BYTES:
        raise StoreFileError(f"tuning store file {where}: {size} bytes, more than the {MAX_STORE_BYTES} a store "
                             f"may have")
    try:
        with open(where, "rb") as f:
            raw = f.read(MAX_STORE_BYTES + 1)
    except OSError as error:
        raise StoreFileError(f"tuning store file {where}: cannot be read ({error.strerror})") from None
    if len(raw) > MAX_STORE_BYTES:
        raise StoreFileError(f"tuning store file {where}: more than the {MAX_STORE_BYTES} bytes a store may have")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):  # their messages may quote the file: name none of it
        raise StoreFileError(f"tuning store file {where}: not UTF-8 JSON (write it with nbx tune --export)") from None


def _refuse_constant(name):
    raise ValueError("NaN and infinities are not JSON")


def _check(document, where: str) -> None:
    def refuse(problem):
        raise StoreFileError(f"tuning store file {where}: {problem}")
    if not isinstance(document, dict) or document.get("format") != STORE_FORMAT:
        refuse(f"not a tuning store (its format field must be {STORE_FORMAT!r}; write it with nbx tune --export)")
    if document.get("version") != STORE_VERSION:
        refuse(f"a store format version other than {STORE_VERSION}, the one this nbxtensor reads")
    if set(document) != {"format", "version", "stores"}:
        refuse("fields other than format, version and stores at its top level")
    stores = document["stores"]
    if not isinstance(stores, dict):
        refuse("stores is not an object of device classes")
    total = 0
    for number, (name, entries) in enumerate(stores.items(), 1):
        if not isinstance(name, str) or not _CLASS_NAME.fullmatch(name):
            refuse(f"device class number {number} is not a name of letters, digits, '_', '.' or '-' (64 at most)")
        if not isinstance(entries, dict):
            refuse(f"device class number {number} does not hold an object of entries")
        total += len(entries)
        if total > MAX_ENTRIES:
            refuse(f"more than {MAX_ENTRIES} entries")
        for position, (key, entry) in enumerate(entries.items(), 1):
            problem = _entry_problem(key, entry, name)
            if problem:
                refuse(f"entry number {position} of device class number {number}: {problem}")


def _text(value, limit=MAX_TEXT) -> bool:
    return isinstance(value, str) and len(value) <= limit and value.isprintable()


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _config_problem(config) -> str | None:
    if not isinstance(config, dict) or len(config) > MAX_CONFIG_ITEMS:
        return f"a setting that is not an object of at most {MAX_CONFIG_ITEMS} fields"
    for name, value in config.items():
        if not _text(name, 64) or not (isinstance(value, bool) or _text(value, 64)
                                       or (isinstance(value, int) and 0 <= value <= MAX_SETTING)):
            return (f"a setting field that is not a name with an integer (0 to {MAX_SETTING}), boolean or short "
                    f"text value")
    return None


def _entry_problem(key, entry, class_name: str) -> str | None:
    if not _text(key) or "|" not in key:
        return "a launch key that is not printable text of kernel|extents|dtypes|flags"
    if not isinstance(entry, dict):
        return "not an object"
    unknown = set(entry) - {"config", "ms", "candidates", "certified", "device_class", "versions", "refused",
                            "shapes"}
    if unknown:
        return f"{len(unknown)} field(s) a tuning entry does not have"
    if entry.get("config") is not None and _config_problem(entry["config"]):
        return _config_problem(entry["config"])
    if entry.get("ms") is not None and not _number(entry["ms"]):
        return "ms is not a finite number"
    if not isinstance(entry.get("candidates", 0), int) or isinstance(entry.get("candidates"), bool) \
            or not 0 <= entry.get("candidates", 0) <= 100_000:
        return "candidates is not a count"
    if not isinstance(entry.get("certified", False), bool):
        return "certified is not true or false"
    if entry.get("device_class", class_name) != class_name:
        return "made on a device class other than the one it is filed under"
    found = entry.get("versions")
    if found is not None and (not isinstance(found, dict) or set(found) != set(_VERSION_NAMES)
                              or not all(_text(v, 64) for v in found.values())):
        return f"versions is not an object of {', '.join(_VERSION_NAMES)}"
    refused = entry.get("refused", [])
    if not isinstance(refused, list) or len(refused) > MAX_REFUSED:
        return f"refused is not a list of at most {MAX_REFUSED} candidates"
    for item in refused:
        if not isinstance(item, dict) or set(item) != {"config", "reason"} or not _text(item["reason"]):
            return "a refused candidate that is not a setting with a reason"
        if _config_problem(item["config"]):
            return "a refused candidate's " + _config_problem(item["config"])
    shapes = entry.get("shapes", [])
    if not isinstance(shapes, list) or len(shapes) > 16 or not all(
            isinstance(s, list) and len(s) <= 16 and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                         for n in s) for s in shapes):
        return "shapes is not a short list of extents"
    return None
