#!/usr/bin/env python3
"""Command line of the testbed (run, up, exec, validate, report, predict, cleanup, schema, image,
cluster): a shim over testbed.cli, which is also the `dltestbed` console command."""
import sys

from testbed.cli import main

if __name__ == "__main__":
    sys.exit(main())
