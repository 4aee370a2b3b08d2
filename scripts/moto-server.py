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

A second change, for speed only: moto's `TransactWriteItems` deep-copies the whole table once
per item of the transaction to restore it on failure; here the backup is the table's item maps
with a copy of each item the transaction names (`transactions_back_up_what_they_touch`), which
restores the same state. Without it a transaction costs items × table size: a 91-item firing on
a table of 540 items took 2.5 s. A Query reads its partition only (base table, local index) or
every item unsorted (global index), not the whole table sorted (`queries_read_their_partition`):
a table growing by a run a second made every claim and sweep slower by the minute. Likewise moto's SendMessage builds every attribute of the queue, three of them counting its
messages, to read one attribute only FIFO queues have; on a standard queue it now skips that
(`send_without_counting`): without it sending 90 messages to a queue holding 600 took 0.8 s.
BatchGetItem's check for duplicate keys compared every key with every other: 0.2 s for a
hundred keys (`batch_gets_find_duplicates_in_one_pass`).

And one change of behaviour, towards SQS's: moto's long poll (ReceiveMessage with a wait) wakes
only when a message is sent, or after a second, and a poll of one second then ends without
looking again; so a message whose delay (or visibility timeout) ends during a poll is not
returned by it, where SQS returns it at once. `long_polls_see_delays_end` wakes the poll when
the first such message becomes visible. Without it, a worker long-polling one queue a second
at a time saw a delayed message up to a few seconds late.

Usage: <venv>/bin/python scripts/moto-server.py -H 127.0.0.1 -p <port>
"""

import argparse
import copy
import os
import signal
import sys
import threading
import time
import types

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


# A DynamoDB request that waited for its turn, or took, longer than this is written to stderr
# (the server's log): what to look at when a test on moto times out. SKED_MOTO_TRACE=1 writes
# every DynamoDB request so (with its index for a Query), to see where moto's time goes.
TRACE = bool(os.environ.get("SKED_MOTO_TRACE"))
SLOW_SECONDS = 0.0 if TRACE else 1.0


class SerializeDynamoDb:
    """WSGI middleware: one DynamoDB request at a time, the response body included."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if not _is_dynamodb(environ):
            return self.app(environ, start_response)
        shape = _shape(environ) if TRACE else ""
        asked = time.monotonic()
        with self.lock:
            started = time.monotonic()
            # Consume the whole response under the lock: moto may produce it lazily.
            answer = list(self.app(environ, start_response))
            done = time.monotonic()
        if done - asked > SLOW_SECONDS:
            operation = environ.get("HTTP_X_AMZ_TARGET", "?").rsplit(".", 1)[-1]
            print(
                f"{time.strftime('%H:%M:%S', time.gmtime())}.{int(time.time() * 1000) % 1000:03d} "
                f"slow DynamoDB request {operation}{shape}: waited {started - asked:.3f} s, took {done - started:.3f} s",
                file=sys.stderr,
                flush=True,
            )
        return answer


def _shape(environ):
    """What a traced request asks for, in a few words: a Query's index, how many keys a
    BatchGetItem names, which kind of item (its sort key's prefix) a GetItem or single-item
    write names, how many items a TransactWriteItems writes. Reads the body and puts it
    back for moto."""
    import io
    import json

    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return ""
    if "IndexName" in request:
        return f"[{request['IndexName']}]"
    if "RequestItems" in request:
        return f"[{sum(len(t.get('Keys', [])) for t in request['RequestItems'].values())} keys]"
    if "Key" in request:
        # The sort key's kind (JOB, RUN, QUOTA, ...): which item a GetItem or write names.
        sort_key = next(iter(request["Key"].get("sk", {}).values()), "")
        return f"[{sort_key.split('#', 1)[0]}]"
    if "Item" in request:
        sort_key = next(iter(request["Item"].get("sk", {}).values()), "")
        return f"[{sort_key.split('#', 1)[0]}]"
    if "TransactItems" in request:
        return f"[{len(request['TransactItems'])} items]"
    return ""


def transactions_back_up_what_they_touch():
    """Makes moto's TransactWriteItems back up, to restore on failure, only what a transaction
    can change. moto deep-copies the whole table once per item of the transaction, before it
    writes anything: a transaction costs items × table size (a 91-item firing on a table of
    540 items took 2.5 s), and on a table that grows by a run a second every claim's transaction
    grows slower, so runs of a per-second job start late enough to overlap. The backup kept
    here is a new table object over the same items (a copy of the item maps, not of the items),
    with a deep copy of each item the transaction names: puts and deletes replace items in the
    live table (the backup keeps the old ones), updates change an item in place (the backup has
    its own copy). Restoring it restores exactly what moto's full copy would have. Safe because
    DynamoDB requests run one at a time (`SerializeDynamoDb`)."""
    from collections import defaultdict

    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        touched = {}
        for item in transact_items:
            for _, op in item.items():
                table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
                if table is None:
                    continue
                attrs = op.get("Item") or op.get("Key") or {}
                if table.hash_key_attr not in attrs:
                    continue
                range_value = None
                if table.range_key_attr and table.range_key_attr in attrs:
                    range_value = DynamoType(attrs[table.range_key_attr])
                touched.setdefault(id(table), []).append((DynamoType(attrs[table.hash_key_attr]), range_value))
        backups = {}

        def backup(table):
            kept = copy.copy(table)
            kept.items = defaultdict(dict)
            for hash_value, held in table.items.items():
                kept.items[hash_value] = dict(held) if table.range_key_attr else held
            for hash_value, range_value in touched.get(id(table), []):
                held = table.items.get(hash_value)
                if held is None:
                    continue
                if not table.range_key_attr:
                    kept.items[hash_value] = copy.deepcopy(held)
                elif range_value is not None and range_value in held:
                    kept.items[hash_value][range_value] = copy.deepcopy(held[range_value])
            return kept

        def deepcopy(obj, *args):
            if isinstance(obj, Table):
                if id(obj) not in backups:
                    backups[id(obj)] = backup(obj)
                return backups[id(obj)]
            return copy.deepcopy(obj, *args)

        models.copy = types.SimpleNamespace(deepcopy=deepcopy, copy=copy.copy)
        try:
            return original(self, transact_items)
        finally:
            models.copy = copy

    models.DynamoDBBackend.transact_write_items = transact_write_items


def queries_read_their_partition():
    """Makes a Query look only at the items it can match, without sorting the whole table first.
    moto's `Table.query` starts from `all_items()`, which lists and sorts every item of the
    table, then keeps those of the partition (or of the index's key) and sorts them again: each
    query of one job's runs, and each of the sweeper's queries of the `sched` index, costs the
    whole table, and a table that grows by a run a second (a per-second cron) makes every claim,
    overlap check and sweep slower by the minute — until, with a ten-minute look-ahead, moto
    spent seconds per sweep and requests waited their turn for tens of seconds.

    Here a base-table query, and a query of a local index (whose partition key is the table's),
    starts from its partition's items; a global index query starts from every item unsorted,
    since moto sorts the matches by the index's keys (then the table's, a total order) anyway.
    The same items in the same order, so the answers are unchanged. Safe because DynamoDB
    requests run one at a time (`SerializeDynamoDb`)."""
    from moto.dynamodb.models.table import Table

    original = Table.query

    def query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
              scan_index_forward, projection_expressions, index_name=None, *args, **kwargs):
        def partition_items():
            partition = self.items.get(hash_key)
            if partition is None:
                return []
            if self.range_key_attr:
                return sorted(partition.values(), key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)
            return [partition]

        def every_item():
            if self.range_key_attr:
                return [item for partition in self.items.values() for item in partition.values()]
            return list(self.items.values())

        local = {index.name for index in self.indexes or []}
        if hash_key is None:
            items = None
        elif index_name is None or index_name in local:
            items = partition_items()
        else:
            items = every_item()
        if items is None:
            return original(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                            scan_index_forward, projection_expressions, index_name, *args, **kwargs)
        self.all_items = lambda: items
        try:
            return original(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                            scan_index_forward, projection_expressions, index_name, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query


def batch_gets_find_duplicates_in_one_pass():
    """Makes BatchGetItem's duplicate-key check linear. moto compares every key with every
    earlier one (a list scan with dict equality): a hundred keys cost ~5,000 comparisons of
    nested dicts, about 0.2 s per request on this machine — and sked's sweeps and claims send
    batches of up to a hundred keys, so moto spent seconds a minute on this check alone while
    every other DynamoDB request waited its turn. Same answer: keys are compared by their
    canonical JSON (sorted attribute names), which is equal exactly when the dicts are."""
    import json

    from moto.dynamodb.responses import DynamoHandler

    def _contains_duplicates(self, keys):
        seen = set()
        for key in keys:
            canonical = json.dumps(key, sort_keys=True)
            if canonical in seen:
                return True
            seen.add(canonical)
        return False

    DynamoHandler._contains_duplicates = _contains_duplicates


def send_without_counting():
    """Makes moto's SendMessage on a standard queue skip building the queue's attributes: it
    reads only `ContentBasedDeduplication`, an attribute of FIFO queues, which a standard
    queue's attributes do not have (so the answer is the same), and building them counts
    every message in the queue three times. FIFO queues, and every other reader of the
    attributes (GetQueueAttributes included), are served as before; the flag is per thread,
    and moto serves each request on a thread of its own."""
    from moto.sqs.models import Queue, SQSBackend

    sending = threading.local()
    attributes = Queue.attributes.fget
    send_message = SQSBackend.send_message

    def queue_attributes(self):
        if getattr(sending, "standard", False):
            return {}
        return attributes(self)

    def send(self, queue_name, *args, **kwargs):
        sending.standard = not self.get_queue(queue_name).fifo_queue
        try:
            return send_message(self, queue_name, *args, **kwargs)
        finally:
            sending.standard = False

    Queue.attributes = property(queue_attributes)
    SQSBackend.send_message = send


def long_polls_see_delays_end():
    """Makes a long poll wake when the first message waiting out a delay or a visibility
    timeout becomes visible (as well as when one is sent, and at the end of the wait), so that
    ReceiveMessage returns it then, as SQS does. moto's receive loop looks at the queue again
    whenever this returns before the poll's end."""
    from moto.core.utils import unix_time_millis
    from moto.sqs.models import Queue

    def wait_for_messages(self, timeout):
        deadline = time.monotonic() + timeout
        with self._messages_lock:
            while not self.messages:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                now = unix_time_millis()
                ends = [max(m.delayed_until, m.visible_at) for m in self._messages]
                first = min((t for t in ends if t >= now), default=None)
                if first is not None:
                    left = min(left, (first - now) / 1000 + 0.005)
                self._messages_lock.wait(left)

    Queue.wait_for_messages = wait_for_messages


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    # moto builds some answers (SQS queue URLs) from it, as its own server does.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    transactions_back_up_what_they_touch()
    queries_read_their_partition()
    batch_gets_find_duplicates_in_one_pass()
    send_without_counting()
    long_polls_see_delays_end()
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
