"""Touching files a student could have made: read as regular files with a cap, removed without
following links and without raising.

A student's code may leave a FIFO (a read blocks for ever), a link to /dev/zero (a read never
ends) or a tree 1500 levels deep (shutil.rmtree raises RecursionError, which ignore_errors does
not catch).  These two functions are the only way the judge reads or removes such files.
"""
import contextlib
import os
import stat

# The largest student file the judge reads (the submission loader and the fork server's spool).
MAX_SOURCE_BYTES = 2 * 1024 * 1024


class NotRegular(OSError):
    """The path is not a regular file (a FIFO, a device, a folder)."""


class TooLarge(OSError):
    """The file holds more than the cap allows."""


def read_regular(path, cap):
    """The bytes of `path`, a regular file of at most `cap` bytes: opened with O_NONBLOCK (a FIFO
    cannot block the open) and checked on the open descriptor; never more than cap + 1 read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{path}: not a regular file")
        if info.st_size > cap:
            raise TooLarge(f"{path}: larger than {cap} bytes")
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:  # grew after the fstat
            raise TooLarge(f"{path}: larger than {cap} bytes")
        return data
    finally:
        os.close(fd)


def remove_tree(path):
    """Remove `path` and everything under it; never follows a link, recurses or raises.  Each
    folder's content is moved up into the top folder first, so depth costs neither stack nor
    descriptors.  True when it is gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return True
    if not stat.S_ISDIR(info.st_mode):
        return _quietly(os.unlink, path)
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        _empty(top)
    finally:
        os.close(top)
    return _quietly(os.rmdir, path)


def _empty(top):
    counter = 0
    for _ in range(1_000_000):  # a bound, not a limit anyone reaches: each round removes a name
        try:
            names = os.listdir(top)
        except OSError:
            return
        if not names:
            return
        for name in names:
            try:
                info = os.stat(name, dir_fd=top, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                _quietly(os.unlink, name, dir_fd=top)
                continue
            if _quietly(os.rmdir, name, dir_fd=top):
                continue
            counter = _hoist(top, name, counter)
            _quietly(os.rmdir, name, dir_fd=top)


def _hoist(top, name, counter):
    """Move the content of folder `name` (inside `top`) up into `top`, under fresh names."""
    with contextlib.suppress(OSError):
        os.chmod(name, 0o700, dir_fd=top)  # a folder its maker made unreadable (not a link: lstat)
    try:
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                        dir_fd=top)
    except OSError:
        return counter
    try:
        for child in os.listdir(inner):
            for _ in range(100):
                counter += 1
                try:
                    os.rename(child, f".rm-{os.getpid()}-{counter}", src_dir_fd=inner,
                              dst_dir_fd=top)
                    break
                except FileExistsError:
                    continue
                except OSError as exc:
                    if exc.errno not in (39,):  # ENOTEMPTY: that name is a full folder, next one
                        break
    except OSError:
        pass
    finally:
        os.close(inner)
    return counter


def _quietly(action, *args, **kwargs):
    try:
        action(*args, **kwargs)
        return True
    except OSError:
        return False
