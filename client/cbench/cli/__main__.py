"""``python -m cbench.cli``: the same as the ``cbench`` command."""

from cbench.cli import main

if __name__ == "__main__":
    main()
