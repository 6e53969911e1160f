"""ignis.cli — the `ignis` console script of a pip installation: runs the compiled CLI that
came with the package (ignis/bin/ignis), with the same arguments, exit status and signals."""
import os
import sys

from ._native import Error, cli_path


def main() -> None:
    try:
        exe = cli_path()
    except Error as e:
        sys.stderr.write(f"ignis: error: {e}\n")
        sys.exit(1)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
