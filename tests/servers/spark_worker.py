"""The Spark side of tests/servers/spark.py, run as its own Python process with pyspark 3.5
(from .cache/spark/python) ahead of the virtualenv's own pyspark: one local SparkSession for
the whole run, driven by requests on stdin, one JSON object a line:

    {"code": "<python>", "vars": {...}, "out": "<path>"}

The code runs with `spark` (a new session of the one SparkContext) and the vars in scope and may set `result`: a DataFrame is written
to `out` as an Arrow IPC file (its rows, collected through Arrow); anything else JSON-able is
sent back as it is. Each request gets one JSON line on the reply stream: {"ok": true,
"arrow": path} or {"ok": true, "value": ...} or {"ok": false, "error": traceback}. The JVM's
and Spark's own output goes to stderr (the log file), never into the replies.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def session(conf: dict[str, str]):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(conf.pop("master", "local[2]")).appName("dataferry")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def arrow_of(df, path: str) -> None:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = df._collect_as_arrow()
    table = pa.Table.from_batches(batches) if batches else to_arrow_schema(df.schema).empty_table()
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else writes to stdout (the JVM) lands in the log
    spark = session(json.loads(sys.argv[1]))
    replies.write(json.dumps({"ok": True, "value": spark.version}) + "\n")
    from pyspark.sql import DataFrame

    for line in sys.stdin:
        request = json.loads(line)
        # a new session a request: Iceberg's JDBC catalog instance keeps its SQLite
        # connection's view of the catalog from its first read, blind to later commits by
        # other processes (dataferry's); a new session has new catalog instances
        scope = {"spark": spark.newSession(), **request.get("vars", {})}
        try:
            exec(request["code"], scope)
            result = scope.get("result")
            if isinstance(result, DataFrame):
                arrow_of(result, request["out"])
                reply = {"ok": True, "arrow": request["out"]}
            else:
                reply = {"ok": True, "value": result}
        except BaseException:
            reply = {"ok": False, "error": traceback.format_exc()}
        replies.write(json.dumps(reply, default=str) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
