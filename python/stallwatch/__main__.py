"""``python -m stallwatch ARGS…``: the ``stallwatch`` command this package ships."""

from __future__ import annotations

import os
import sys

from ._errors import StallwatchNotFound
from ._find import find_stallwatch_bin


def main() -> None:
    try:
        binary = find_stallwatch_bin()
    except StallwatchNotFound as e:
        print(f"stallwatch: {e}", file=sys.stderr)
        sys.exit(125)
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
