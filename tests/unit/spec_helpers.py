"""Helpers shared by the spec tests: write YAML to tmp_path, load, collect issues."""

import textwrap

import pytest

from testbed.spec import SpecError, load_spec


def write(tmp_path, text, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load(tmp_path, text, overrides=()):
    return load_spec(write(tmp_path, text), overrides)


def issues(tmp_path, text, overrides=()):
    with pytest.raises(SpecError) as err:
        load(tmp_path, text, overrides)
    return err.value.errors


def one(tmp_path, text, overrides=()):
    found = issues(tmp_path, text, overrides)
    assert len(found) == 1, "\n".join(map(str, found))
    return found[0]
