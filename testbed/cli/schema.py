"""`schema`: the JSON Schema of experiment files."""
from __future__ import annotations

import json

from testbed.cli.common import Command


def run(args) -> int:
    from testbed.spec import json_schema
    print(json.dumps(json_schema(), indent=2))
    return 0


COMMAND = Command("schema", "print the JSON Schema of experiment files", lambda p: None, run)
