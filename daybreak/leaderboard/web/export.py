"""`daybreak leaderboard export DIR`: the site as static files, written so that no link can redirect a write.

Every file is written through **directory descriptors**: each folder of the output tree is opened once, relative to
its parent's descriptor, with ``O_NOFOLLOW`` (a link there is refused, naming it), and each file is created in its
folder's descriptor under a temporary name (``O_EXCL | O_NOFOLLOW``) and renamed over its name in the same folder (a
rename replaces a link, never follows it). A folder swapped for a link once the export has opened it changes
nothing: the descriptor is the folder the export checked, wherever its path now leads (issue 38: checking the
tree for links, then writing by path, wrote 46 files outside it when ``entries/`` was swapped mid-way). A link
found before anything is written is refused as before (no_links); the folder named on the command line may
itself be a link.

Where the system has no descriptor-relative calls (not POSIX), each path is checked for links just before it is
written, as before.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from daybreak.errors import ConfigError
from daybreak.fileio import dir_mode, file_mode

if TYPE_CHECKING:
    from daybreak.leaderboard.web.pages import Site

_FLAGS_OK = all(hasattr(os, flag) for flag in ("O_NOFOLLOW", "O_DIRECTORY")) and all(
    call in os.supports_dir_fd for call in (os.open, os.mkdir, os.rename, os.stat, os.unlink))


def link_refused(path: Path) -> ConfigError:
    return ConfigError(f"{path}: a symbolic link in the export's folder: `leaderboard export` does not write "
                       "through links (remove it, or export to a new folder)")


class SafeTree:
    """Files written under ``root`` through directory descriptors (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.folders: dict[tuple[str, ...], int] = {}
        self.written = 0
        if _FLAGS_OK:
            self.folders[()] = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)

    def _folder(self, parts: tuple[str, ...]) -> int:
        """The descriptor of the folder ``parts`` under the root (made with mkdir's mode where missing)."""
        found = self.folders.get(parts)
        if found is not None:
            return found
        parent = self._folder(parts[:-1])
        name = parts[-1]
        try:
            os.mkdir(name, dir_mode(), dir_fd=parent)
        except FileExistsError:
            pass
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise link_refused(self.root.joinpath(*parts)) from None
            raise
        self.folders[parts] = fd
        return fd

    def write(self, relative: str, text: str) -> None:
        """``text`` as the file ``relative`` (``tasks/cifar10/train-time.html``): written whole, then renamed in."""
        parts = tuple(relative.split("/"))
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"not a path inside the export: {relative!r}")
        if not _FLAGS_OK:
            return self._write_by_path(parts, text)
        folder, name = self._folder(parts[:-1]), parts[-1]
        if _is_link(name, folder):  # refused as before (the rename below would replace it, not follow it)
            raise link_refused(self.root.joinpath(*parts))
        temporary = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, file_mode(), dir_fd=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=folder)
            except FileNotFoundError:
                pass
            raise
        self.written += 1

    def _write_by_path(self, parts: tuple[str, ...], text: str) -> None:
        from daybreak.fileio import atomic_write_text

        here = self.root
        for part in parts:
            here = here / part
            if os.path.islink(here):
                raise link_refused(here)
        atomic_write_text(here, text)
        self.written += 1

    def close(self) -> None:
        for fd in self.folders.values():
            os.close(fd)
        self.folders.clear()

    def __enter__(self) -> SafeTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_link(name: str, folder: int) -> bool:
    import stat

    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def no_links(folder: Path) -> None:
    """The export's output tree holds no symbolic link (a link would make it write outside the tree); ConfigError
    naming the first one. ``folder`` itself may be a link: the user named it."""
    if not folder.is_dir():
        return
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs + files):
            if os.path.islink(Path(root) / name):
                raise link_refused(Path(root) / name)


def export_site(site: Site, folder: Path) -> int:
    """Write the whole site under ``folder`` -> the number of files written.

    Linear in the entries: each board is read once (columns only) and gives every entry's rank on it; a board
    with rows then gets its sorted and filtered pages (boardpage.static_variants), one query each; the
    reproductions are read in one query; then the entries are read in id order, 100 at a time, each page
    rendered from what is already known."""
    from daybreak.leaderboard.ranking.objectives import OBJECTIVES, leaderboard
    from daybreak.leaderboard.tasks import all_tasks
    from daybreak.leaderboard.web import boardpage
    from daybreak.leaderboard.web.pages import entry_json, static_link, task_json

    no_links(folder)
    store = site.store
    with SafeTree(folder) as tree:
        tree.write("index.html", site.index_html(static_link(0)))
        tasks_json = []
        ranks: dict[int, dict[str, tuple[int, int]]] = {}
        for task in all_tasks():
            tasks_json.append(task_json(task))
            if task.clock_rules == "mlperf" and not store.count(task.name):
                continue  # an MLPerf benchmark's board is written once it holds an entry (as on the index)
            for obj in OBJECTIVES.values():
                rows = leaderboard(store, task.name, obj)
                for r in rows:
                    ranks.setdefault(r["entry_id"], {})[obj.name] = (r["rank"], len(rows))
                facets = site.facets(task.name, obj) if rows else {}
                tree.write(f"tasks/{task.name}/{obj.name}.html",
                           site.board_html(task.name, obj.name, static_link(2), per_page=None, rows=rows,
                                           facets=facets))
                tree.write(f"api/leaderboard/{task.name}/{obj.name}.json", json.dumps(rows, indent=2) + "\n")
                for query in boardpage.static_variants(facets) if rows else []:
                    tree.write(f"tasks/{task.name}/{obj.name}/{query.static_name()}.html",
                               site.board_html(task.name, obj.name, static_link(3), per_page=None, query=query,
                                               facets=facets))
        tree.write("api/tasks.json", json.dumps(tasks_json, indent=2) + "\n")
        reproductions = store.all_reproductions()
        for entry in store.iter_entries():
            tree.write(f"entries/{int(entry.id)}.html",
                       site.entry_html(entry, static_link(1), ranks=ranks.get(entry.id, {}),
                                       reproductions=reproductions.get(entry.id, [])))
            tree.write(f"api/entries/{int(entry.id)}.json", json.dumps(entry_json(entry), indent=2) + "\n")
        return tree.written
