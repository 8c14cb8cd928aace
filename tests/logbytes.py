"""A log file's bytes as the tests read and edit them (ARCHITECTURE.md, docs/format.md).

A 64-byte header, then records: magic u16, op u8, flags u8, salt u32, lsn u64, at i64,
key_len u16, durable_gap u16 (format version 2), payload len u32, key, payload, crc32c u32.
The tests parse the file themselves, independently of the engine, so that what a test
asserts about the bytes does not depend on the code under test; the tamper tests edit
records here and recompute the CRCs they touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HEADER_LEN = 64
RECORD_MAGIC = 0x4D43
OP_PUT, OP_STATUS, OP_MOVE, OP_TASK, OP_SEAL, OP_ENTITY = 1, 2, 3, 4, 5, 6
FLAG_COMMIT_END = 1


# -- CRC32C (Castagnoli), table-driven ---------------------------------------------------


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data: bytes | bytearray) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# -- records and the whole file ----------------------------------------------------------


@dataclass
class Rec:
    """One record's bytes as the file holds them, and where it was."""

    offset: int
    data: bytearray

    @property
    def op(self) -> int:
        return self.data[2]

    @property
    def flags(self) -> int:
        return self.data[3]

    @property
    def lsn(self) -> int:
        return int.from_bytes(self.data[8:16], "little")

    @lsn.setter
    def lsn(self, value: int) -> None:
        self.data[8:16] = value.to_bytes(8, "little")

    @property
    def key_len(self) -> int:
        return int.from_bytes(self.data[24:26], "little")

    @property
    def key(self) -> bytes:
        return bytes(self.data[32 : 32 + self.key_len])

    @property
    def durable_gap(self) -> int:
        return int.from_bytes(self.data[26:28], "little")

    @property
    def payload_start(self) -> int:
        return 32 + self.key_len

    @property
    def payload(self) -> bytes:
        return bytes(self.data[self.payload_start : len(self.data) - 4])

    @property
    def crc(self) -> int:
        return int.from_bytes(self.data[-4:], "little")

    # A seal's payload: version u8, flags u8, covered lsn u64, chain [32], mac [32].
    @property
    def covers(self) -> int:
        assert self.op == OP_SEAL
        p = self.payload_start
        return int.from_bytes(self.data[p + 2 : p + 10], "little")

    @covers.setter
    def covers(self, value: int) -> None:
        assert self.op == OP_SEAL
        p = self.payload_start
        self.data[p + 2 : p + 10] = value.to_bytes(8, "little")

    def chain_span(self) -> slice:
        assert self.op == OP_SEAL
        p = self.payload_start
        return slice(p + 10, p + 42)

    def fix_crc(self) -> None:
        self.data[-4:] = crc32c(self.data[:-4]).to_bytes(4, "little")

    def replace(self, old: bytes, new: bytes) -> None:
        """Replace bytes in the record (same length, exactly one occurrence)."""
        assert len(old) == len(new)
        at = self.data.find(old)
        assert at >= 0 and self.data.find(old, at + 1) < 0, (old, self.data)
        self.data[at : at + len(old)] = new


@dataclass
class Log:
    """A log file: its header and its whole records, in file order."""

    header: bytearray
    recs: list[Rec]

    def by_lsn(self, lsn: int) -> Rec:
        (r,) = [r for r in self.recs if r.lsn == lsn]
        return r

    def index(self, lsn: int) -> int:
        return next(i for i, r in enumerate(self.recs) if r.lsn == lsn)

    @property
    def end(self) -> int:
        return HEADER_LEN + sum(len(r.data) for r in self.recs)

    @property
    def generation(self) -> int:
        return int.from_bytes(self.header[32:40], "little")

    @property
    def store_id(self) -> bytes:
        return bytes(self.header[16:32])

    @property
    def dense_from(self) -> int:
        return int.from_bytes(self.header[40:48], "little")

    def lsns(self) -> list[int]:
        return [r.lsn for r in self.recs]

    def without_seals(self) -> list[bytes]:
        return [bytes(r.data) for r in self.recs if r.op != OP_SEAL]


def parse_log(data: bytes, name: str = "the data") -> Log:
    """Split a log file into its header and whole records (stops at a zero or torn tail)."""
    assert data[:8] == b"MEMCMLOG", f"{name} is not a memcommit log"
    recs = []
    off = HEADER_LEN
    while off + 32 <= len(data):
        if int.from_bytes(data[off : off + 2], "little") != RECORD_MAGIC:
            break
        key_len = int.from_bytes(data[off + 24 : off + 26], "little")
        length = int.from_bytes(data[off + 28 : off + 32], "little")
        total = 36 + key_len + length
        if off + total > len(data):
            break
        recs.append(Rec(off, bytearray(data[off : off + total])))
        off += total
    return Log(bytearray(data[:HEADER_LEN]), recs)


def read_log(path: Path | str) -> Log:
    return parse_log(Path(path).read_bytes(), str(path))


def write_log(path: Path | str, log: Log) -> None:
    """Write the header and the records back to back (recomputing offsets)."""
    out = bytearray(log.header)
    for r in log.recs:
        r.offset = len(out)
        out += r.data
    Path(path).write_bytes(bytes(out))
