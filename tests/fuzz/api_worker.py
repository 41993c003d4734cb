"""Worker process of the fuzz suite: calls one parser on a list of files and prints one JSON line per case.

    python tests/fuzz/api_worker.py {vbin|network|npy} LISTING.json FIRST

``LISTING.json`` is a JSON list of file paths; the worker starts at index FIRST and, for each case, prints
``start I`` before calling the parser and the result as JSON after it, so that the driver
(contract.run_api_cases) knows which case a hang or a crash belongs to.
"""

from __future__ import annotations

import json
import resource
import sys
import time


def _reader(kind: str):
    from vtasm.fileio import read_npy
    from vtasm.formats.network import read_network
    from vtasm.formats.vbin import read_vbin

    def vbin(path: str):
        with open(path, "rb") as fh:
            return read_vbin(fh.read(), path)

    def network(path: str):
        with open(path, "rb") as fh:
            return read_network(fh.read(), path)

    return {"vbin": vbin, "network": network, "npy": read_npy}[kind]


def main() -> None:
    kind, listing, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from vtasm.errors import FormatError, VtaError

    read = _reader(kind)
    with open(listing) as fh:
        paths = json.load(fh)
    for index in range(first, len(paths)):
        print(f"start {index}", flush=True)
        began = time.monotonic()
        record = {"index": index, "kind": "ok", "type": "", "message": ""}
        try:
            read(paths[index])
        except FormatError as exc:
            record.update(kind="error", type=type(exc).__name__, message=str(exc))
        except VtaError as exc:
            record.update(kind="other", type=type(exc).__name__, message=str(exc))
        except BaseException as exc:  # noqa: B036 - the point is to see anything the parser lets out
            record.update(kind="crash", type=type(exc).__name__, message=" ".join(str(exc).split())[:300])
        record["seconds"] = time.monotonic() - began
        record["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
