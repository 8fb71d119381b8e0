"""The command line, `sharding-explorer` (also `python -m explorer.cli`): its public
face. `sharding-explorer --help` lists the commands."""

from explorer._src.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
