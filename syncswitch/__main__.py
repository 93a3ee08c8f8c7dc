"""Allows `python -m syncswitch`."""

from syncswitch.cli import main

if __name__ == "__main__":
    main()
