"""What a launch request carries of the user's code: the script's folder as a bundle, or why it stays home."""

from __future__ import annotations

import dataclasses
import logging
import re

from syncswitch.errors import SpecError
from syncswitch.wire import bundle as bundlemod

log = logging.getLogger(__name__)


class ScriptShipment:
    """Made once before any node starts (a named folder over the limit is a spec error); asked at every launch."""

    def __init__(self, spec, run_dir: str, say=lambda text: None):
        self.spec, self.say, self.said = spec, say, False
        with open(spec.script, "rb") as fh:
            self.source = fh.read()  # the script alone, for agents given no bundle
        try:
            made = bundlemod.make(spec.script, spec.workdir, skip=(run_dir,))
        except bundlemod.BundleTooLarge as exc:
            if spec.workdir_given:
                raise SpecError(f"workdir={spec.workdir!r}: {exc}; name a smaller folder, or null to ship the "
                                "script alone") from None
            made = dataclasses.replace(bundlemod.make(spec.script, None), overflow=str(exc))
        if spec.workdir is not None and not made.overflow:
            log.info("shipping %s: %d file(s), %d bytes (%d zipped)", spec.workdir, made.files, made.size,
                     len(made.data))
        self.bundle = made

    def describe(self) -> str:
        """What goes to the nodes, in words (the dry run)."""
        made, spec = self.bundle, self.spec
        if made.overflow:
            return (f"{spec.script}; its folder {made.overflow}: run in place where the nodes share this filesystem, "
                    "else the script alone")
        if spec.workdir is None:
            return f"{spec.script}, alone (workdir: null)"
        return (f"{made.script_name} in {spec.workdir}, shipped with it: {made.files} file(s), "
                f"{made.size / 1024:.0f} KiB ({len(made.data) / 1024:.0f} KiB zipped)")

    def named_as_yours(self, message: str) -> str:
        """`message` naming the user's script where a node named its copy (unpacked under its `script/` folder)."""
        copy = r"[^\s:'\"]*/script/" + re.escape(self.bundle.script_name) + r"(?![\w./-])"
        return re.sub(copy, lambda _: self.spec.script, message)

    def for_nodes(self, shared_filesystem: bool) -> tuple[str, bytes]:
        """The script's name and bundle for a launch request. A default folder over the limit stays home: nodes that
        share this filesystem run the script where it is (absolute name, no bundle), others get the script alone."""
        made = self.bundle
        if not made.overflow:
            return made.script_name, made.data
        if not self.said:
            self.said = True
            where = ("the nodes share this filesystem: the script runs where it is" if shared_filesystem
                     else "only the script is shipped to the nodes (set workdir: to ship a smaller folder)")
            log.warning("the script's folder %s; %s", made.overflow, where)
            self.say(f"syncswitch: the script's folder {made.overflow}; {where}")
        return (self.spec.script if shared_filesystem else made.script_name), b""
