"""``python -m quietus ARGS…``: the ``quietus`` command this package ships."""

from __future__ import annotations

import os
import sys

from ._errors import QuietusNotFound
from ._find import find_quietus_bin


def main() -> None:
    try:
        binary = find_quietus_bin()
    except QuietusNotFound as e:
        print(f"quietus: {e}", file=sys.stderr)
        sys.exit(125)
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
