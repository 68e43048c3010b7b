"""A copy of drill 04's fast backward with more d = 128 autotune configurations, for
``bench/backward_speed.py --fast-file`` (issue 26: the d = 128 full backward is 0.72-0.74x
cuDNN with the shipped lists).  Writes the copy to the path given and prints its lists.

    python3 bench/backward_configs_trial.py /tmp/fast_trial.py
    python3 bench/backward_speed.py --fast-file /tmp/fast_trial.py --kernels fast-recompute --seqs 4096,16384 --all-configs --no-check

Added: 32-row query steps with 128-key blocks in the dK/dV pass (the tutorial's shape;
the shipped list leaves them out because of the visit-map anomaly, which concerns the
fixed-tile launch that records visits, not these) and 32-key steps in the dQ pass.
"""

import re
import sys
from pathlib import Path

FAST = Path(__file__).resolve().parent.parent / "solutions" / "04_flash_backward_fast.py"
EXTRA_DKDV_128 = [(32, 128, 4, 3), (32, 128, 8, 3), (32, 128, 4, 2), (64, 128, 4, 3)]
EXTRA_DQ_128 = [(128, 32, 4, 3), (128, 32, 8, 3), (64, 32, 4, 3), (128, 64, 4, 3)]


def main() -> int:
    source = FAST.read_text()
    for name, extra in (("_DKDV_CONFIGS", EXTRA_DKDV_128), ("_DQ_CONFIGS", EXTRA_DQ_128)):
        pattern = re.compile(rf"({name} = \{{.*?\n    128: \[)(.*?)(\],)", re.S)
        match = pattern.search(source)
        assert match, name
        source = source[: match.end(2)] + ", " + ", ".join(map(str, extra)) + source[match.end(2):]
    Path(sys.argv[1]).write_text(source)
    for line in source.splitlines():
        if line.startswith("    128: ["):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
