"""An S3-compatible server for flemma-object's tests: moto's, on 127.0.0.1.

Usage: python s3_server.py [--serialized]

Prints the port it listens on (a free one, chosen by the kernel) as one line on standard
output, then serves until its standard input is closed (the test process that started it ended,
however it ended), and exits.

--serialized runs one request at a time. moto's put_object checks If-None-Match / If-Match and
then writes the object in two steps, and its server runs each request on a thread of its own, so
two conditional writes of one key can both pass the check (moto/s3/responses.py, put_object).
A lock around the whole application makes each request atomic, which is what S3 promises.
"""

import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.moto_server.threaded_moto_server import MotoRequestHandler
from werkzeug.serving import make_server


def serialized(app):
    lock = threading.Lock()

    def call(environ, start_response):
        with lock:
            # The body is produced inside the lock too: moto builds it eagerly, but a lazy
            # iterable must not escape the critical section.
            return list(app(environ, start_response))

    return call


def main():
    app = DomainDispatcherApplication(create_backend_app)
    if "--serialized" in sys.argv[1:]:
        app = serialized(app)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(server.server_port, flush=True)
    # Serve until the parent closes our standard input (or dies).
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
