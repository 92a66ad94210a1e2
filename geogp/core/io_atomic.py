"""Atomic writes: a temporary file beside the destination, moved into place when complete.

:func:`atomic_path` writes under a short hidden name in the destination's directory and moves
the finished file into place with :func:`os.replace`, so a failure (full disk, interrupted run,
bad argument) never leaves a partial file behind, and an existing file is replaced only by a
complete one. :func:`check_writable` refuses existing outputs unless ``overwrite``, and targets
that are not regular files (devices, pipes, sockets) always. Re-exported by
:mod:`geogp.frontend.io`.

The hidden names carry the writing process's id (``.NAME.geogp-PID-XXXXXXXX.tmpSUFFIX``, and
``.NAME.geogp-previous-PID-XXXXXXXX`` for the copy of a replaced output): a run killed while
writing (SIGKILL: no cleanup runs) leaves them behind, and the next write to the same target
removes those whose process is gone (:func:`remove_stale`).

:func:`room_for` says how many bytes a new file in a folder may take (free space, and the
process's file-size limit), for writers that must not meet a full disk (HDF5: see
:func:`geogp.frontend.io.write_netcdf`). :func:`keep_previous` keeps an output that a command is
about to replace, so that the command can put it back if it fails later.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from geogp.exceptions import InputError, OutputExistsError

try:
    import resource  # POSIX only: the file-size limit of room_for
except ImportError:
    resource = None

__all__ = ["atomic_path", "check_writable", "hidden_sibling", "keep_previous", "remove_stale",
           "room_for"]

_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
STALE_AFTER_S = 60.0  # hidden files younger than this are never removed (clock skew, NFS)


def check_writable(path: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """Raise :class:`OutputExistsError` if ``path`` exists, unless ``overwrite``.

    A folder, a missing parent folder, an existing target that is not a regular file (a
    device such as ``/dev/null``, a pipe, a socket; links are followed), and a folder where
    no file can be created (read-only) raise :class:`InputError` whatever ``overwrite``
    says: geogp never replaces them.
    """
    path = _checked_target(path, overwrite)
    _probe(path, _folder(path))
    return path


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _checked_target(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """:func:`check_writable` without the probe file (for a caller about to create one)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write {str(path)!r}: it is a folder; give a file name "
                         "inside it instead.")
    try:
        mode = os.stat(path).st_mode  # follows links: a link to a device is a device
    except FileNotFoundError:
        mode = None
    except OSError as err:
        raise InputError(f"cannot write {str(path)!r}: {err.strerror or err}.") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise InputError(f"cannot write {str(path)!r}: it exists and is not a regular file "
                         "(a device, pipe or socket); geogp replaces only regular files. "
                         "Give a new file name.")
    if mode is not None and not overwrite:
        raise OutputExistsError(
            f"{str(path)!r} already exists; pass overwrite=True (CLI: --overwrite) to replace it."
        )
    parent = _folder(path)
    if not parent.is_dir():
        raise InputError(f"cannot write {str(path)!r}: folder {str(parent)!r} does not exist.")
    return path


def _probe(path: Path, folder: Path) -> None:
    """Create and remove a hidden file in ``folder``: a read-only folder or file system is
    refused now, before any work, not when the result is written."""
    fd, probe = _create_hidden(path, folder, "probe-", "")
    os.close(fd)
    os.remove(probe)


def _create_hidden(path: Path, folder: Path, middle: str, suffix: str) -> tuple[int, str]:
    """``tempfile.mkstemp`` of a hidden file beside ``path``; the OS's refusal in one line."""
    try:
        return tempfile.mkstemp(prefix=f"{_hidden_prefix(path)}{middle}", suffix=suffix,
                                dir=folder)
    except PermissionError:
        raise InputError(f"cannot write {str(path)!r}: no permission to create files in "
                         f"{str(folder)!r}; choose another folder.") from None
    except OSError as err:
        raise InputError(f"cannot write {str(path)!r}: {err.strerror or err} (in "
                         f"{str(folder)!r}).") from None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], overwrite: bool = False) -> Iterator[Path]:
    """Context manager yielding a temporary path next to ``path``; moved into place on success.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = _checked_target(path, overwrite)  # creating the temporary file probes the folder
    remove_stale(path)
    fd, tmp = _create_hidden(path, _folder(path), f"{os.getpid()}-", _tmp_suffix(path))
    os.close(fd)
    try:
        yield Path(tmp)
        _flush_to_disk(tmp)  # a full disk or an I/O error surfaces here, before the rename
        if path.exists() and not overwrite:  # appeared meanwhile
            raise OutputExistsError(f"{str(path)!r} appeared while writing; not replaced.")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
        _fsync_dir(_folder(path))
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(err, OSError) and err.errno in _NO_ROOM:  # which file, in one line
            raise OSError(err.errno, f"cannot write {str(path)!r}: {err.strerror} (disk "
                          "full?); nothing was kept at the target path") from None
        raise


def _hidden_prefix(path: Path) -> str:
    """The start of a hidden working name beside ``path``: its name cut to 24 characters, so
    that the name with a random token and a suffix stays far below the 255-byte limit of file
    names whatever the target's legal length."""
    return f".{path.name[:24]}.geogp-"


def _tmp_suffix(path: Path) -> str:
    return ".tmp" + path.suffix[:8]


def hidden_sibling(path: str | os.PathLike[str], kind: str) -> Path:
    """A short hidden name beside ``path`` (``kind``: e.g. "previous") with this process's id
    and a random token."""
    path = Path(path)
    return path.with_name(f"{_hidden_prefix(path)}{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def _stale_pattern(path: Path) -> re.Pattern:
    """The exact hidden names geogp gives beside ``path``: temporary files and copies."""
    prefix = re.escape(_hidden_prefix(path))
    return re.compile(rf"{prefix}(?:(\d+)-[a-z0-9_]{{8}}{re.escape(_tmp_suffix(path))}"
                      rf"|previous-(\d+)-[0-9a-f]{{8}})")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (POSIX signal 0; "exists" when in doubt)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def remove_stale(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the hidden files that killed geogp runs left beside ``path``: names of exactly
    geogp's pattern for this target, whose process id is no longer alive, regular files older
    than :data:`STALE_AFTER_S`. POSIX only (elsewhere a process check could not be made
    safely); best effort, never raises. Returns the paths removed."""
    path = Path(path)
    if os.name != "posix":
        return []
    folder = _folder(path)
    pattern, removed, now = _stale_pattern(path), [], time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or _alive(int(m.group(1) or m.group(2))):
            continue
        stale = folder / name
        try:
            st = os.lstat(stale)
            if stat.S_ISREG(st.st_mode) and now - st.st_ctime >= STALE_AFTER_S:
                os.remove(stale)
                removed.append(stale)
        except OSError:
            continue
    return removed


def _flush_to_disk(tmp) -> None:
    """fsync the finished temporary file; raises OSError (e.g. ENOSPC) if it cannot be stored."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if os.path.getsize(tmp) == 0:
        raise OSError(f"writing {tmp!r} produced an empty file (disk full?); nothing was kept.")


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (best effort: some file systems refuse fsync on folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def room_for(path: str | os.PathLike[str]) -> float:
    """Bytes a new file at ``path`` may take: the free space of its folder's file system
    (for this user), capped by the process's file-size limit (``ulimit -f``); ``inf`` when
    neither can be read."""
    room = float("inf")
    with contextlib.suppress(OSError):
        room = float(shutil.disk_usage(_folder(Path(path))).free)
    if resource is None:
        return room
    try:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (OSError, ValueError):
        return room
    return room if limit == resource.RLIM_INFINITY else min(room, float(limit))


def keep_previous(path: str | os.PathLike[str]) -> Path:
    """A hidden copy of the existing file ``path`` beside it (:func:`hidden_sibling`), to put
    back with ``os.replace`` if what replaces it must be taken back. A hard link where the
    file system has them (no space needed: a full disk cannot refuse it), else a copy; a copy
    that fails leaves nothing and raises :class:`OSError` in one line."""
    path = Path(path)
    copy = hidden_sibling(path, "previous")
    try:
        os.link(path, copy)
        return copy
    except OSError:
        pass  # no hard links here (FAT, some network shares): copy
    try:
        shutil.copy2(path, copy)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.remove(copy)
        raise OSError(f"cannot keep a copy of {str(path)!r} to restore if this command fails "
                      f"({err.strerror or err}; disk full?); nothing was changed.") from None
    return copy
