"""Docker image references ([registry[:port]/]repository[:tag][@digest]), checked without Docker,
so the spec can refuse a bad `image:` with its line before anything starts."""
from __future__ import annotations

import re

_HOSTPART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_HOSTPART}(?:\.{_HOSTPART})*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"


def reference_problem(name: str) -> str | None:
    """None when `name` is a valid docker image reference, else a message saying what is wrong."""
    def bad(why: str) -> str:
        return (f"image {name!r} is not a valid docker image reference "
                f"([registry/]repository[:tag][@digest]): {why}")
    if not isinstance(name, str) or not name:
        return bad("it is empty")
    if any(c.isspace() for c in name):
        return bad("it contains white space")
    rest, digest = name, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not re.fullmatch(_DIGEST, digest):
            return bad(f"digest {digest!r} is not ALGORITHM:HEX (e.g. sha256: and 64 hex digits)")
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not re.fullmatch(_TAG, tag):
            return bad(f"tag {tag!r} must be 1-128 letters, digits, '_', '.' or '-', not starting with '.' or '-'")
    if not rest:
        return bad("the repository name is missing")
    parts = rest.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        if not re.fullmatch(_DOMAIN, parts[0]):
            return bad(f"registry {parts[0]!r} is not a host name with an optional :port")
        parts = parts[1:]
    for part in parts:
        if not part:
            return bad("the repository has an empty path component ('//' or a trailing '/')")
        if not re.fullmatch(_COMPONENT, part):
            if part.lower() != part and re.fullmatch(_COMPONENT, part.lower()):
                return bad(f"repository names must be lowercase ({part!r})")
            return bad(f"{part!r} must be lowercase letters and digits, separated by '.', '_', '__' or '-'")
    if len(rest) > 255:
        return bad("the repository name is longer than 255 characters")
    return None
