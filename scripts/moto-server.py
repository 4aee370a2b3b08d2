"""moto server for sked's tests and `make local-aws`: moto's own server, with DynamoDB
requests handled one at a time.

Why: `moto_server` answers every request on a thread of its own, and moto's DynamoDB is not
isolated under concurrency. Its `TransactWriteItems` checks conditions and writes without a
lock, and restores a copy of the table when a transaction fails, so two concurrent
transactions can both pass their condition checks, and a failed one can undo another's
write. DynamoDB's transactions are serializable; a lock around every DynamoDB request gives
moto the same property, so a test that races conditional writes checks what DynamoDB
guarantees. Other services stay concurrent: SQS long polls (ReceiveMessage with a wait) must
not hold up the rest.

Usage: <venv>/bin/python scripts/moto-server.py -H 127.0.0.1 -p <port>
"""

import argparse
import os
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def _service(environ):
    """The AWS service a request is signed for (SigV4 credential scope), or ""."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    marker = "Credential="
    start = auth.find(marker)
    if start < 0:
        return ""
    scope = auth[start + len(marker):].split(",", 1)[0].split("/")
    # <key>/<date>/<region>/<service>/aws4_request
    return scope[3] if len(scope) >= 5 else ""


def _is_dynamodb(environ):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    return target.startswith("DynamoDB_") or _service(environ) == "dynamodb"


class SerializeDynamoDb:
    """WSGI middleware: one DynamoDB request at a time, the response body included."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if not _is_dynamodb(environ):
            return self.app(environ, start_response)
        with self.lock:
            # Consume the whole response under the lock: moto may produce it lazily.
            return list(self.app(environ, start_response))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    # moto builds some answers (SQS queue URLs) from it, as its own server does.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # as moto_server: a failure answers with moto's traceback
    run_simple(
        args.host,
        args.port,
        SerializeDynamoDb(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
