"""`python -m testbed.spec [--schema] [FILE...]`: print the JSON Schema, or validate files."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from testbed.spec.load import json_schema, validate_file


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.spec", description="validate experiment files")
    parser.add_argument("files", nargs="*", help="YAML files to validate")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--schema", action="store_true", help="print the JSON schema and exit")
    args = parser.parse_args(argv)
    if args.schema:
        print(json.dumps(json_schema(), indent=2, sort_keys=False))
        return 0
    ok_all = True
    for file in args.files:
        ok, text = validate_file(file, args.overrides)
        print(text, file=sys.stdout if ok else sys.stderr)
        ok_all &= ok
    return 0 if ok_all else 1


sys.exit(main())
