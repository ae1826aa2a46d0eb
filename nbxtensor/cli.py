"""The ``nbx`` command line."""
from __future__ import annotations

import argparse
import sys


def _info(_args) -> int:
    import triton
    import yaml

    import nbxtensor as nbx
    from nbxtensor import _runtime
    from nbxtensor.device import available_backends

    print(f"nbxtensor {nbx.__version__}")
    print(f"triton {triton.__version__}")
    print(f"python {sys.version.split()[0]}")
    print(f"kernels: {_runtime.KERNEL_MODE}"
          + (" (Triton interpreter on host memory)" if _runtime.KERNEL_MODE == _runtime.INTERPRETED else ""))
    print(f"default device: {nbx.default_device()}")
    for name, backend in sorted(available_backends().items()):
        print(f"device {name}: {backend.device_count()} found")
        for key, value in backend.describe().items():
            if key != "type":
                print(f"  {key}: {value}")
        facts = backend.facts
        print(f"  facts in force: {facts['name']}" + (" (no facts file matches this GPU; derived from its driver "
                                                      "properties)" if facts.get("derived") else ""))
        for line in yaml.safe_dump({k: v for k, v in facts.items() if k not in ("name", "match", "derived")},
                                   default_flow_style=None, sort_keys=False).splitlines():
            print(f"    {line}")
    return 0


def _example(_args) -> int:
    import nbxtensor as nbx

    x = nbx.arange(12, dtype=nbx.float32).reshape(3, 4)
    print("x =", x)
    print("x.T[1:, ::2] =", x.T[1:, ::2])
    print("cat([x, x.half()]) dtype:", nbx.cat([x, x.half()]).dtype)
    print("as NumPy:", x.T.contiguous().numpy().tolist())
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nbx", description="nbxtensor: tensors and Triton kernels, no torch")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, Triton, devices and the facts in force").set_defaults(run=_info)
    sub.add_parser("example", help="a short tensor example on the default device").set_defaults(run=_example)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
