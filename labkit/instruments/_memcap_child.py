"""The child behind :func:`labkit.run_capped` (chapter 02; run as a script, never imported).

Run as a plain file so it does not import the labkit package (and torch with it): its
start-up footprint, the baseline the cap sits on, stays small. Prints one JSON line.
"""

import json
import resource
import sys


def status() -> dict[str, int]:
    """VmData, RssAnon, RssFile, VmRSS, VmHWM of this process, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmData", "RssAnon", "RssFile", "RssShmem", "VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def main() -> None:
    job = json.loads(sys.argv[1])
    import numpy as np  # before the baseline: the cap is for the data, not the imports

    base = status()
    cap = base["VmData"] + int(job["headroom"])
    resource.setrlimit(resource.RLIMIT_DATA, (cap, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    peak = dict(base)

    def sample():
        for k, v in status().items():
            peak[k] = max(peak.get(k, 0), v)

    result = {"baseline": base, "cap": cap, "rows": 0, "checksum": 0.0, "error": None}
    try:
        if job["how"] == "eager":
            arr = np.load(job["path"])  # reads every byte into anonymous memory
            sample()
            result["rows"] = int(arr.shape[0])
            result["checksum"] = float(arr[:, 0].sum(dtype=np.float64))
        else:
            arr = np.load(job["path"], mmap_mode="r")  # a read-only file mapping
            step = int(job["batch_rows"])
            total = 0.0
            for lo in range(0, arr.shape[0], step):
                block = np.array(arr[lo:lo + step])  # one batch copied out, then dropped
                total += float(block[:, 0].sum(dtype=np.float64))
                result["rows"] += len(block)
                sample()  # while the batch copy is alive: it is part of the peak
                del block
            result["checksum"] = total
    except MemoryError as e:
        result["error"] = f"MemoryError: {e}"
    sample()
    result["peak"] = peak
    print(json.dumps(result))


if __name__ == "__main__":
    main()
