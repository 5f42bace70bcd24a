"""Run gradfix from a checkout without installing it: `python cli.py check .`.

The command line lives inside the package (`codemods/cli.py`, `codemods/commands.py`), so that
installing gradfix adds no generic top-level `cli` module to site-packages; the `gradfix`
command runs the same `main`."""

from codemods.cli import main

if __name__ == "__main__":
    main()
