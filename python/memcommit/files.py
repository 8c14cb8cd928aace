"""Writing a file beside the log whole or not at all, as the core does for its own files.

A temp file is written, fsynced, renamed over the target, and the directory fsynced; on a
failure before the rename the temp file is removed and the target is as it was. A failure
after it (the directory's fsync) leaves the new target in place, though not known to be
durable: the error says which. The manifest and snapshots use it; ``memcommit export --out``
takes the same steps with the helpers below, streaming its file.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
from collections.abc import Iterator

# STORAGE_ERRNOS: the errors that mean the disk failed, filled up or went read-only (the
# core's list, which makes the same errors StorageError).
from ._native import STORAGE_ERRNOS
from .errors import InvalidType, InvalidValue, StorageError


def path_arg(value: object, name: str, what: str = "a file name") -> str:
    """`value` as a file name, for the argument `name`: a str or os.PathLike of one.

    `what` says what the argument names, for the message when it is empty.

    Raises:
        InvalidType: Not a str or os.PathLike[str] (bytes included).
        InvalidValue: Empty, or holding a NUL character.
    """
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidType(f"{name} must be str or os.PathLike[str], not {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise InvalidType(f"{name} must be str or os.PathLike[str], not {type(path).__name__}")
    if not path:
        raise InvalidValue(f"{name}: must not be empty ({what})")
    if "\x00" in path:
        raise InvalidValue(f"{name}: {path!r} holds a NUL character, which no file name may")
    return path


def space_needed(bytes_: int) -> str:
    """What a full disk's error adds: how much more free space the operation needs."""
    return (
        f"the disk is full: this needs up to {bytes_} more bytes "
        f"({bytes_ / (1 << 20):.1f} MiB) of free space"
    )


def is_store_file(path: str, log: str) -> bool:
    """Whether writing `path` would replace the log `log` or a file of it.

    Those are the log, its lock file, index file and manifest (links followed; either may not
    exist yet), and the names the writer's open removes as a crash's leftovers (``<log>.tmp-*``).
    """
    real, real_log = os.path.realpath(path), os.path.realpath(log)
    if os.path.dirname(real) == os.path.dirname(real_log) and os.path.basename(real).startswith(
        os.path.basename(real_log) + ".tmp-"
    ):
        return True
    return any(
        _same_file(path, name) for name in (log, f"{log}.lock", f"{log}.index", f"{log}.manifest")
    )


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def sync_directory(path: str) -> None:
    """Sync the directory holding `path` to disk, so that its entries survive a power loss."""
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_of_this_process(target: str) -> str:
    """A temp file for one write of `target` from this process: ``<target>.tmp-<pid>-<n>``.

    Named by the process and numbered within it, so two processes, or two threads of one,
    writing `target` at once never share one. A process killed between writing it and renaming
    it leaves it behind: the temp files of `target` whose process is no longer running are
    removed here, so a crash's leftovers go with the next write of the same file.
    """
    directory, name = os.path.split(os.path.abspath(target))
    prefix = f"{name}.tmp-"
    with contextlib.suppress(OSError):
        for entry in os.listdir(directory):
            pid = entry[len(prefix) :].split("-", 1)[0]
            if entry.startswith(prefix) and pid.isdigit() and not _running(int(pid)):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(directory, entry))
    return f"{target}.tmp-{os.getpid()}-{next(_TEMP_NUMBERS)}"


# The number of each temp file this process names (`next` on a count is atomic in CPython).
_TEMP_NUMBERS = itertools.count(1)


def _running(pid: int) -> bool:
    """Whether a process `pid` runs (one this process may not signal runs too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's, or not a pid: never remove what may be in use
    return True


def replace_durably(target: str, tmp: str, data: bytes) -> None:
    """Put `data` at `target` whole or not at all, through the temp file `tmp`.

    Raises:
        StorageError: The disk failed, is full (the message says how much room `data`
            needs) or is read-only. Before the rename `target` is as it was; after it (the
            directory's fsync failed) `target` holds `data`, but whether a power loss would
            keep it is unknown, and the message says so.
        OSError: Any other failure (permissions, a missing directory), as the OS gave it;
            after the rename, with the same message about `target`.
    """
    replaced = False
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        replaced = True
        sync_directory(target)
    except BaseException as error:
        if not replaced:
            with contextlib.suppress(OSError):
                os.remove(tmp)
        if not isinstance(error, OSError) or error.errno is None:
            raise
        if replaced:
            message = replaced_but_not_synced(target, error)
            if error.errno in STORAGE_ERRNOS:
                raise StorageError(message, target, error.errno) from error
            raise OSError(error.errno, message, target) from error
        if error.errno in STORAGE_ERRNOS:
            full = error.errno in (errno.ENOSPC, errno.EDQUOT)
            message = f"write {target}: {os.strerror(error.errno)} (os error {error.errno})"
            if full:
                message += f"; {space_needed(len(data))}"
            raise StorageError(message, target, error.errno) from error
        raise


def replaced_but_not_synced(target: str, error: OSError) -> str:
    """What an error after `target` was renamed into place, syncing its directory, says."""
    reason = os.strerror(error.errno) if error.errno is not None else str(error)
    return (
        f"write {target}: the file was replaced, but syncing its directory failed: {reason} "
        f"(os error {error.errno}); its durability is unknown: a power loss may undo the rename"
    )


class WriterHolds(Exception):
    """A writer has the log open: it holds the lock on `lock`, the lock file or the log file.

    Its message says which: "it holds the lock on PATH.lock", or "it holds the lock on the log
    file PATH itself" (taken under whatever name the writer opened it by: a hard link's too).
    """

    def __init__(self, lock: str, *, log_file: bool) -> None:
        super().__init__(
            f"it holds the lock on the log file {lock} itself, under this name or another"
            if log_file
            else f"it holds the lock on {lock}"
        )
        self.lock = lock


@contextlib.contextmanager
def holding_writer_locks(path: str) -> Iterator[None]:
    """Hold, for the block, both locks a writer of the log at `path` holds, or raise at once.

    The locks ``memcommit.open`` takes, found as it finds them: a symbolic link is followed to
    the file it names first; then the lock file beside it, ``<log>.lock``, and the log file's
    own ``flock``, which a writer holds under whatever name it opened the file (a hard link,
    or a lock file of another name). Creates nothing: without a lock file no writer opened the
    log under its name, and a file that is not there (or is not a regular file) no writer holds.
    Where ``flock`` is not available the block runs unguarded.

    Raises:
        WriterHolds: Another writer (in this process or another) holds one of them; the
            exception names the file whose lock it holds.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    log = os.path.realpath(path) if os.path.islink(path) else path
    with contextlib.ExitStack() as held:
        for name, log_file in ((f"{log}.lock", False), (log, True)):
            fd = _open_to_lock(name, must_be_regular=log_file)
            if fd is None:
                continue
            held.callback(os.close, fd)  # closing the descriptor lets the lock go
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise WriterHolds(name, log_file=log_file) from None
        yield


def _open_to_lock(name: str, *, must_be_regular: bool) -> int | None:
    """A descriptor of `name` to take an ``flock`` on; None when there is nothing to lock."""
    try:
        if must_be_regular and not stat.S_ISREG(os.stat(name).st_mode):
            return None
        try:
            # Read-write, as the writer opens it (an exclusive lock over NFS needs one).
            return os.open(name, os.O_RDWR)
        except PermissionError:
            return os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return None
