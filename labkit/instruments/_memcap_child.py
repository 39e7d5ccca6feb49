"""The child behind :func:`labkit.instruments.run_capped` (chapter 02; run as a script).

Run as a plain file so it does not import the labkit package (and torch with it): its
start-up footprint, the baseline the cap sits on, stays small. Prints one JSON line.
"""

import json
import resource
import sys


def status() -> dict[str, int]:
    """VmData, RssAnon, RssFile and VmHWM of this process, in bytes."""
    with open("/proc/self/status") as f:
        rows = [line.split() for line in f]
    return {r[0][:-1]: int(r[1]) * 1024 for r in rows
            if r[0] in ("VmData:", "RssAnon:", "RssFile:", "VmHWM:")}


def main() -> None:
    job = json.loads(sys.argv[1])
    import numpy as np  # before the baseline: the cap is for the data, not the imports

    base = status()
    cap = base["VmData"] + int(job["headroom"])
    resource.setrlimit(resource.RLIMIT_DATA, (cap, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    peak, rows, checksum, error, step = dict(base), 0, 0.0, None, int(job["batch_rows"])
    try:
        # eager: np.load reads every byte into anonymous memory; mmap: a read-only file mapping
        arr = np.load(job["path"], mmap_mode="r" if job["how"] == "mmap" else None)
        for lo in range(0, arr.shape[0], step):
            block = np.array(arr[lo:lo + step])  # one batch copied out, then dropped
            rows, checksum = rows + len(block), checksum + float(block[:, 0].sum(dtype="f8"))
            peak = {k: max(v, peak[k]) for k, v in status().items()}  # the copy is alive
    except MemoryError as e:
        error = f"MemoryError: {e}"
    print(json.dumps({"baseline_data": base["VmData"], "cap": cap, "rows": rows,
                      "checksum": checksum, "error": error,
                      "anon_growth": peak["RssAnon"] - base["RssAnon"],
                      "peak_file": peak["RssFile"], "peak_rss": peak["VmHWM"]}))


if __name__ == "__main__":
    main()
