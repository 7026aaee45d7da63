"""The hostile retriever plugin (tests/fixtures/rk_hostile) laid out as an installed package."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SOURCE = Path(__file__).parent / "fixtures" / "rk_hostile"


def lay_out(site: Path) -> Path:
    """Its module and a dist-info folder in ``site``, as pip would leave them."""
    meta = tomllib.loads((SOURCE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE / "rk_hostile.py", site / "rk_hostile.py")
    dist_info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist_info.mkdir(exist_ok=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n",
        encoding="utf-8",
    )
    sections = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in meta["entry-points"].items()
    ]
    (dist_info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
    return site
