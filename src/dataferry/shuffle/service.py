"""The shuffle service: one per node, serving map outputs and merging pushed blocks.

It serves original map-output blocks (by shuffle, map attempt and reduce range) and merged
chunks with zero-copy file sending, accepts pushes into the merge state machine (`merge.py`),
finalizes merges, serves merged metadata, and removes a shuffle's files when told. A wrong
token, a malformed or an oversized frame closes that connection only; the service keeps serving.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..errors import ConfigError, CorruptShuffleData, NotFound, StoreError
from ..net import BackgroundServer, RawConnection
from ..stats import IOStatistics
from ..store import Store
from .blocks import HEADER, MAGIC, unframe
from .config import MergerConfig
from .files import check_app, decode_offsets, map_output
from .mapoutput import block_range
from .merge import MergeManager, PushCode
from .protocol import MAGIC as FRAME_MAGIC
from .protocol import MAX_HEADER_BYTES, PREFIX, Msg, prefix


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ShuffleService:
    """The service over a node's shuffle directory (a store); start() / stop()."""

    def __init__(self, store: Store, config: MergerConfig | None = None, io_threads: int = 8):
        self.store = store
        self.config = config or MergerConfig()
        self.merges = MergeManager(store, self.config)
        self.stats = IOStatistics()
        self._io = ThreadPoolExecutor(io_threads, thread_name_prefix="shuffle-io")
        self._indexes: OrderedDict[str, list[int]] = OrderedDict()  # small LRU of index files
        self._indexes_lock = threading.Lock()
        # raw sockets: a pushed payload is received straight into one buffer, with no stream
        # buffer copying it on the way
        self._server = BackgroundServer(None, "shuffle-loop", raw_handler=self._connection)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> ShuffleService:
        self._server.start(host, port)
        return self

    @property
    def address(self) -> str:
        host, port = self._server.address
        return f"{host}:{port}"

    def stop(self) -> None:
        self._server.stop()
        self._io.shutdown(wait=True)

    def __enter__(self) -> ShuffleService:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def snapshot(self) -> dict[str, Any]:
        stats = IOStatistics(self.stats.snapshot())
        stats.merge(self.merges.stats.snapshot())
        stats.merge(self.store.stats.snapshot())
        return stats.snapshot()

    # --- connection ------------------------------------------------------------------------

    async def _connection(self, conn: RawConnection) -> None:
        authed = not self.config.token
        buffer = bytearray(0)  # reused for every payload of this connection
        while True:
            raw = await conn.read_exactly(PREFIX.size)
            if raw is None:
                return
            magic, msg, header_len, payload_len = PREFIX.unpack(raw)
            if magic != FRAME_MAGIC or header_len > MAX_HEADER_BYTES:
                return await self._refuse(conn, 400, "malformed frame")
            if payload_len > self.config.max_frame_bytes:
                return await self._refuse(
                    conn, 413, f"payload of {payload_len} bytes over {self.config.max_frame_bytes}"
                )
            head = await conn.read_exactly(header_len)
            if payload_len > len(buffer):
                buffer = bytearray(payload_len)
            payload = await conn.read_exactly(payload_len, buffer)
            if head is None or payload is None:
                return
            try:
                header = json.loads(bytes(head) or b"{}")
                if not isinstance(header, dict):
                    raise ValueError("header is not an object")
            except ValueError as e:
                return await self._refuse(conn, 400, f"malformed header: {e}")
            if not authed:
                if msg == Msg.HELLO and hmac.compare_digest(
                    str(header.get("token", "")), self.config.token
                ):
                    authed = True
                    await self._answer(conn, {})
                    continue
                self.stats.incr("requests_unauthorized")
                return await self._refuse(conn, 401, "missing or wrong token")
            try:
                await self._dispatch(Msg(msg), header, payload, conn)
            except BadRequest as e:
                self.stats.incr("requests_refused")
                await self._answer_error(conn, e.status, str(e))
            except (KeyError, TypeError, ValueError, ConfigError, CorruptShuffleData) as e:
                self.stats.incr("requests_refused")
                await self._answer_error(conn, 400, f"bad request: {e}")
            except NotFound as e:
                await self._answer_error(conn, 404, str(e))
            except StoreError as e:
                await self._answer_error(conn, 500, str(e))

    async def _dispatch(
        self, msg: Msg, header: dict[str, Any], payload: memoryview, conn: RawConnection
    ) -> None:
        self.stats.incr(f"requests_{msg.name.lower()}")
        loop = asyncio.get_running_loop()
        if msg == Msg.HELLO:
            await self._answer(conn, {})
        elif msg == Msg.PUSH:
            codes = await self._push(header, payload)
            await self._answer(conn, {"codes": codes})
        elif msg == Msg.FINALIZE:
            app, shuffle, merge_id = _ids(header)
            statuses = await loop.run_in_executor(
                self._io, self.merges.finalize, app, shuffle, merge_id
            )
            bitmaps = [s.bitmap.serialize() for s in statuses]
            rows = [[s.reduce_id, s.size, len(b)] for s, b in zip(statuses, bitmaps, strict=True)]
            await self._answer(conn, {"statuses": rows}, b"".join(bitmaps))
        elif msg == Msg.MERGED_META:
            index, meta = await loop.run_in_executor(self._io, self._merged_meta, header)
            await self._answer(conn, {"index_len": len(index)}, index + meta)
        elif msg == Msg.MERGED_CHUNK:
            path, start, length = await loop.run_in_executor(self._io, self._chunk_range, header)
            await self._send_file(conn, {}, path, start, length)
        elif msg == Msg.FETCH:
            path, start, length, offsets = await loop.run_in_executor(
                self._io, self._fetch_range, header
            )
            await self._send_file(conn, {"offsets": offsets}, path, start, length)
        elif msg == Msg.REMOVE:
            app, shuffle = check_app(str(header["app"])), int(header["shuffle"])
            removed = await loop.run_in_executor(self._io, self.merges.remove, app, shuffle)
            with self._indexes_lock:
                for key in [k for k in self._indexes if k.startswith(f"{app}/shuffle_{shuffle}/")]:
                    del self._indexes[key]
            await self._answer(conn, {"removed": removed})
        elif msg == Msg.STATS:
            await self._answer(conn, {"stats": self.snapshot()})
        else:
            raise BadRequest(400, f"unknown message type {int(msg)}")

    # --- push ------------------------------------------------------------------------------

    async def _push(self, header: dict[str, Any], payload: memoryview) -> list[int]:
        app, shuffle, merge_id = _ids(header)
        blocks = header["blocks"]
        if not isinstance(blocks, list) or sum(int(b[2]) for b in blocks) != len(payload):
            raise BadRequest(400, "push block lengths do not add up to the payload")
        results = await asyncio.get_running_loop().run_in_executor(
            self._io, self._push_blocks, app, shuffle, merge_id, blocks, payload
        )
        codes: list[int] = []
        for r in results:
            code = await asyncio.wrap_future(r) if isinstance(r, Future) else r
            codes.append(int(code))
        return codes

    def _push_blocks(
        self, app: str, shuffle: int, merge_id: int, blocks: list[Any], payload: memoryview
    ) -> list[PushCode | Future]:
        results: list[PushCode | Future] = []
        pos = 0
        view = payload
        for map_index, reduce_id, length in blocks:
            block = view[pos : pos + int(length)]
            pos += int(length)
            if not _well_framed(block, int(map_index), int(reduce_id)):
                self.merges.stats.incr("push_corrupt")
                results.append(PushCode.CORRUPT)
                continue
            results.append(
                self.merges.push(app, shuffle, merge_id, int(map_index), int(reduce_id), block)
            )
        return results

    # --- reads -------------------------------------------------------------------------------

    def _offsets(self, path: str) -> list[int]:
        with self._indexes_lock:
            cached = self._indexes.get(path)
            if cached is not None:
                self._indexes.move_to_end(path)
                return cached
        offsets = decode_offsets(self.store.read_bytes(path), path)
        with self._indexes_lock:
            self._indexes[path] = offsets
            while len(self._indexes) > 4096:
                self._indexes.popitem(last=False)
        return offsets

    def _merged_meta(self, header: dict[str, Any]) -> tuple[bytes, bytes]:
        app, shuffle, merge_id = _ids(header)
        _, index, meta = self._merged(app, shuffle, merge_id, int(header["reduce"]))
        return self.store.read_bytes(index), self.store.read_bytes(meta)

    def _chunk_range(self, header: dict[str, Any]) -> tuple[str, int, int]:
        app, shuffle, merge_id = _ids(header)
        data, index, _ = self._merged(app, shuffle, merge_id, int(header["reduce"]))
        offsets = self._offsets(index)
        chunk = int(header["chunk"])
        start, length = block_range(offsets, chunk, chunk + 1, index)
        return data, start, length

    def _merged(self, app: str, shuffle: int, merge_id: int, reduce_id: int) -> tuple[str, ...]:
        try:
            return self.merges.merged_paths(app, shuffle, merge_id, reduce_id)
        except KeyError as e:
            raise BadRequest(404, str(e.args[0])) from None

    def _fetch_range(self, header: dict[str, Any]) -> tuple[str, int, int, list[int]]:
        app, shuffle = check_app(str(header["app"])), int(header["shuffle"])
        map_index, attempt = int(header["map"]), int(header["attempt"])
        data, index = map_output(app, shuffle, map_index, attempt)
        offsets = self._offsets(index)
        start, end = int(header["start"]), int(header["end"])
        begin, length = block_range(offsets, start, end, index)
        return data, begin, length, [o - begin for o in offsets[start : end + 1]]

    # --- answers -----------------------------------------------------------------------------

    async def _answer(
        self, conn: RawConnection, header: dict[str, Any], payload: bytes = b""
    ) -> None:
        head = json.dumps(header).encode()
        await conn.send(prefix(Msg.OK, len(head), len(payload)) + head, payload)

    async def _answer_error(self, conn: RawConnection, status: int, error: str) -> None:
        head = json.dumps({"status": status, "error": error}).encode()
        await conn.send(prefix(Msg.ERROR, len(head), 0) + head)

    async def _refuse(self, conn: RawConnection, status: int, error: str) -> None:
        """Answer and close: after a bad frame the stream cannot be trusted."""
        self.stats.incr("frames_refused")
        await self._answer_error(conn, status, error)
        await conn.linger_close()

    async def _send_file(
        self, conn: RawConnection, header: dict[str, Any], path: str, start: int, n: int
    ) -> None:
        head = json.dumps(header).encode()
        await conn.send(prefix(Msg.OK, len(head), n) + head)
        if n:
            f = await asyncio.get_running_loop().run_in_executor(
                self._io, self.store.open_read, path
            )
            try:
                await conn.sendfile(f, start, n)
            finally:
                f.close()
        self.stats.incr("served_bytes", n)


def _ids(header: dict[str, Any]) -> tuple[str, int, int]:
    return check_app(str(header["app"])), int(header["shuffle"]), int(header["merge_id"])


def _well_framed(block: memoryview, map_index: int, reduce_id: int) -> bool:
    """A pushed block must be exactly one framed block of the map and reduce it claims."""
    if len(block) < HEADER.size or bytes(block[:4]) != MAGIC:
        return False
    try:
        (only,) = list(unframe(block))
    except (ValueError, CorruptShuffleData):
        return False
    return only.map_index == map_index and only.reduce_id == reduce_id
