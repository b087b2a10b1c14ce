"""moto_server with S3's conditional writes atomic, as S3 makes them.

moto checks a PUT's If-None-Match or If-Match against the stored object and then writes, in
the request's own thread, with nothing held between the two: two PUTs of one key with
If-None-Match: * at the same moment can both succeed, where S3 lets exactly one. Services
that elect a runner by such a PUT (a scheduler's tick, a ledger's first acceptance) would then
see two winners on a busy machine. Here a PUT that carries a condition holds one lock from its
check to its write; PUTs without one are moto's own. Everything else is moto's own.

Imported by moto_lean.py; run alone, it is moto_server with that one change. Arguments are
moto_server's.
"""

import sys
import threading

from moto.s3.responses import S3Response

_conditional = threading.Lock()
_original_put_object = S3Response.put_object


def _put_object(self):
    if self.headers.get("If-None-Match") is None and self.headers.get("If-Match") is None:
        return _original_put_object(self)
    with _conditional:
        return _original_put_object(self)


S3Response.put_object = _put_object


if __name__ == "__main__":
    from moto.server import main

    main(sys.argv[1:])
