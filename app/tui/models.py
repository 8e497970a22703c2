"""What the TUI needs from the model store and loader, behind one small class.

`Models` talks to the real store, pull and loader (imported lazily, so the
app opens before llama.cpp loads). Tests give the app another object with
the same methods, backed by the fake model.
"""

from __future__ import annotations

from dataclasses import dataclass

from specchat.config import Settings
from specchat.sampling import SamplingParams


@dataclass
class PairInfo:
    name: str
    description: str
    pulled: bool
    default: bool = False
    size: int | None = None  # bytes to download (target + draft), where known


class Models:
    """The real store, pull and loader."""

    def pairs(self) -> list[PairInfo]:
        from specchat.store import pair_status

        return [_info(p) for p in pair_status()]

    def default_pair(self) -> str:
        from specchat.store import default_pair_name

        return default_pair_name()

    def is_pulled(self, name: str) -> bool:
        """Both files are in the store. One whose bytes changed counts too:
        opening it then fails with a message that names the file and the fix."""
        from specchat.store import pair_status

        entry = pair_status(name)[0]
        return all(entry[role]["state"] in ("verified", "damaged") for role in ("target", "draft"))

    def pull(self, name: str) -> None:
        """Blocking; run it in a thread. Progress comes from `pull_progress`."""
        from specchat.pull import pull_pair

        pull_pair(name, source="auto", progress=False)

    def pull_progress(self, name: str) -> tuple[int, int | None]:
        """(bytes on disk, bytes in all) of a pull under way, read from the store."""
        from specchat.store import pair_status

        entry = pair_status(name)[0]
        done, total = 0, 0
        files = [entry["target"]] if entry["same_file"] else [entry["target"], entry["draft"]]
        for f in files:
            size = f.get("size")
            total = None if total is None or size is None else total + size
            if f["state"] == "verified":
                done += size or 0
            else:
                done += f.get("partial_bytes") or 0
        return done, total

    def open(self, pair: str, drafter: str, k: int, settings: Settings):
        from specchat.loader import open_session

        return open_session(
            pair,
            drafter=drafter,
            k=k,
            sampling=SamplingParams(temp=settings.temperature),
            system=settings.system_prompt or None,
            threads=settings.threads or None,
            ctx=settings.ctx or None,
        )


def _info(p: dict) -> PairInfo:
    sizes = [p["target"].get("size")] + ([] if p["same_file"] else [p["draft"].get("size")])
    size = None if None in sizes else sum(sizes)
    return PairInfo(p["name"], p.get("description", ""), p["ready"], p.get("default", False), size)
