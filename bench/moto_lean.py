"""moto_server without costs of its own that S3 and SQS do not have, for long runs.

- Listings: moto lists a bucket by copying and walking every object in it, whatever the prefix.
  Here each bucket's object names are also kept in a sorted list, and a listing takes the slice
  under its prefix. What a listing returns is unchanged (`--self-check` compares the two on
  random keys).
- Dispatch: to find the service a request is for, moto lists its own package directory (some
  150 entries, a stat each) and tries its URL patterns in turn, under the lock every request
  takes. Here the answer is kept per host: the directory and the patterns do not change.
- Queue scans: a receive, and a queue's attributes, ask every message in the queue whether it is
  visible (and not delayed), each answer building two datetimes. Here each is one clock read.
- Nagle's algorithm: off on its sockets, as on S3's servers (below, where it is set).
- Connections: werkzeug's server closes the connection after every answer, so each request of
  a client pays a new TCP connection (a socket, and a thread here). S3 keeps them open. Here a
  connection stays open after a request whose body has a length (werkzeug reads what the
  application left of it); a body of unknown length still closes it.

- Conditional writes: atomic, as S3's are (moto_atomic.py, which plain runs use too).

Everything else is moto's own. Arguments are moto_server's.
"""

import bisect
import os
import random
import sys
import time

from werkzeug import serving

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moto_atomic  # noqa: E402,F401  S3's conditional writes atomic (moto_atomic.py)

from moto import backends
from moto.moto_server import werkzeug_app
from moto.s3 import models, utils
from moto.sqs import models as sqs_models

_MODULES = tuple(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: _MODULES
_original_backend_for_host = werkzeug_app.DomainDispatcherApplication.get_backend_for_host
_backend_of_host = {}


def _backend_for_host(self, host):
    if host not in _backend_of_host:
        _backend_of_host[host] = _original_backend_for_host(self, host)
    return _backend_of_host[host]


werkzeug_app.DomainDispatcherApplication.get_backend_for_host = _backend_for_host

# What moto's unix_time_millis() gives, without its datetimes.
sqs_models.Message.visible = property(lambda self: time.time() * 1000.0 > self.visible_at)
sqs_models.Message.delayed = property(lambda self: time.time() * 1000.0 < self.delayed_until)


class _Body:
    """A request's body: at most its Content-Length of the connection, then nothing."""

    def __init__(self, raw, length):
        self.raw = raw
        self.left = length

    def _bounded(self, read, size):
        if self.left <= 0:
            return b""
        data = read(self.left if size is None or size < 0 else min(size, self.left))
        self.left -= len(data)
        return data

    def read(self, size=-1):
        return self._bounded(self.raw.read, size)

    def readline(self, size=-1):
        return self._bounded(self.raw.readline, size)

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def __getattr__(self, name):
        return getattr(self.raw, name)


_Handler = serving.WSGIRequestHandler
_original_run_wsgi = _Handler.run_wsgi
_original_send_header = _Handler.send_header


def _run_wsgi(self):
    # werkzeug reads whatever is left on the connection once it has answered (it closes it
    # anyway): with the body bounded, that is the rest of this request's body, never the next
    # request.
    length = self.headers.get("Content-Length", "0" if "Transfer-Encoding" not in self.headers else "")
    self._keep_open = length.isdigit() and self.headers.get("Connection", "").lower() != "close"
    if not self._keep_open:
        return _original_run_wsgi(self)
    raw = self.rfile
    self.rfile = _Body(raw, int(length))
    try:
        _original_run_wsgi(self)
        if self.rfile.left > 0:
            self.close_connection = True
    finally:
        self.rfile = raw


def _send_header(self, keyword, value):
    if keyword.lower() == "connection" and value.lower() == "close" and getattr(self, "_keep_open", False):
        return
    _original_send_header(self, keyword, value)


_Handler.run_wsgi = _run_wsgi
_Handler.send_header = _send_header
# An answer is written in pieces (its headers, then its body): with Nagle's algorithm a small
# body waited for the client's delayed acknowledgement of the headers, up to 40 ms on loopback
# (a listing or a small ranged GET took 45-50 ms, a HEAD 2 ms). S3's servers send at once.
_Handler.disable_nagle_algorithm = True

_Store = utils._VersionedKeyStore
_NAMES = "_sorted_names"


def _names(keys):
    """The bucket's object names, sorted (built on first use, then kept up to date)."""
    names = keys.__dict__.get(_NAMES)
    if names is None:
        names = sorted(dict.keys(keys))
        keys.__dict__[_NAMES] = names
    return names


def _tracked(method):
    """A mutator of the store that keeps its sorted names in step."""

    def wrapped(self, key, *args, **kwargs):
        existed = dict.__contains__(self, key)
        result = method(self, key, *args, **kwargs)
        names = self.__dict__.get(_NAMES)
        if names is not None:
            exists = dict.__contains__(self, key)
            if exists and not existed:
                bisect.insort(names, key)
            elif existed and not exists:
                at = bisect.bisect_left(names, key)
                if at < len(names) and names[at] == key:
                    del names[at]
        return result

    return wrapped


_Store.__setitem__ = _tracked(_Store.__setitem__)
_Store.__delitem__ = _tracked(dict.__delitem__)
_Store.setlist = _tracked(_Store.setlist)
_Store.pop = _tracked(_Store.pop)

_original_list_objects = models.S3Backend.list_objects


def _under(names, prefix):
    """The names that start with `prefix` (a copy: other requests' threads may add names)."""
    if not prefix:
        return list(names)
    start = bisect.bisect_left(names, prefix)
    end = bisect.bisect_left(names, prefix[:-1] + chr(ord(prefix[-1]) + 1))
    return names[start:end]


def list_objects(self, bucket, prefix, delimiter, marker, max_keys):
    if isinstance(bucket, models.FakeTableStorageBucket):
        return _original_list_objects(self, bucket, prefix, delimiter, marker, max_keys)
    keys = bucket.keys
    key_results = []
    folder_results = set()
    skip = len(prefix or "")
    for name in _under(_names(keys), prefix):
        rest = name[skip:]
        if delimiter and delimiter in rest:
            folder_results.add(f"{prefix or ''}{rest.split(delimiter)[0]}{delimiter}")
            continue
        key = keys.get(name)
        if key is not None and not isinstance(key, models.FakeDeleteMarker):
            key_results.append(key)
    folder_results = sorted(folder_results)
    if marker:
        limit = self._pagination_tokens.get(marker) or marker
        key_results = self._get_results_from_token(key_results, limit)
    if max_keys is not None:
        key_results, is_truncated, next_marker = self._truncate_result(key_results, max_keys)
    else:
        is_truncated = False
        next_marker = None
    return key_results, folder_results, is_truncated, next_marker


models.S3Backend.list_objects = list_objects


def _self_check():
    """Random puts and deletes on a bucket; every listing as moto's own gives it."""
    backend = models.s3_backends["123456789012"]["aws"]
    bucket = backend.create_bucket("self-check", "us-east-1")
    rng = random.Random(7)
    parts = ["a", "b", "ledger", "ready", "x/y", "v1", "é"]
    names = [("/".join(rng.choice(parts) for _ in range(rng.randint(1, 4)))) + str(i) for i in range(400)]
    for step in range(3000):
        name = rng.choice(names)
        if rng.random() < 0.7:
            backend.put_object("self-check", name, b"x")
        elif name in bucket.keys:
            backend.delete_object("self-check", name)
        if step % 50 == 0:
            for prefix in ["", "a", "a/", "ledger/", "x/y", "é", "zz"]:
                for delimiter in [None, "/"]:
                    got = list_objects(backend, bucket, prefix, delimiter, None, None)
                    want = _original_list_objects(backend, bucket, prefix, delimiter, None, None)
                    if [k.name for k in got[0]] != [k.name for k in want[0]] or list(got[1]) != list(want[1]):
                        sys.exit(f"listing differs at step {step}, prefix {prefix!r}, delimiter {delimiter!r}")
    print("listings agree")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-check"]:
        _self_check()
    else:
        from moto.server import main

        main(sys.argv[1:])
