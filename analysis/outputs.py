"""Every file the testbed writes goes through here. An existing target that is not a regular file (a
folder, a device such as /dev/full, a FIFO, a socket, a symbolic link) is refused in one sentence and left
as it is; a file is written beside its target and renamed over it, so that readers see the old file or the
new one, never half of either."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class OutputError(ValueError):
    """A path the testbed would write that it must not replace."""


def _kind(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def check_file(path) -> Path:
    """The path, unless something other than a regular file is there (OutputError) or its parent is not a
    folder."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as err:
        raise OutputError(f"{path}: cannot be written ({err.strerror}); name a file") from err
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(f"{path} is {_kind(mode)}, not a file: the testbed writes only regular files; name a "
                          "file (a new one, or one it wrote before)")
    for parent in path.parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise OutputError(f"{path}: {parent} is not a folder; name a file in a folder")
            break
    return path


def check_folder(path) -> Path:
    """The path, unless something other than a folder is there (OutputError)."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        raise OutputError(f"{path} is {_kind(os.lstat(path).st_mode)}, not a folder; name a folder (a new one, or "
                          "one of earlier results)")
    return path


def write_text(path, text: str, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` through a temporary file beside it and a rename (check_file first)."""
    path = check_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding=encoding) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        check_file(path)            # (still no other kind of file there)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
