"""Writes the archives the archive suites inspect into the directory given as argv[1]."""
import io
import os
import struct
import sys
import tarfile
import zipfile

out = sys.argv[1]
BIG_LINE = "line with é and ü — pädding\n"  # multi-byte characters, so pages can split them


def path(name):
    return os.path.join(out, name)


def zip_bytes(members, compression=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members:
            zf.writestr(zipfile.ZipInfo(name) if isinstance(name, str) and name.endswith("/") else name, data)
    return buf.getvalue()


def tar_bytes(members, mode="w"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as tf:
        for m in members:
            name, data = m[0], m[1]
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            elif isinstance(data, tuple):
                info.type, info.linkname = data
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


big = (BIG_LINE * (3 * 1024 * 1024 // len(BIG_LINE.encode()) + 1)).encode()
binary = bytes(range(256)) * 16

wheel = zip_bytes([
    ("demo/__init__.py", b"print('hello from demo')\n"),
    ("demo/data.bin", binary),
    ("demo/big.txt", big),
    ("demo-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"),
    ("demo-1.0.dist-info/RECORD", b"demo/__init__.py,,\n"),
])
write("demo-1.0-py3-none-any.whl", wheel)

plain = io.BytesIO()
with zipfile.ZipFile(plain, "w") as zf:
    zf.writestr(zipfile.ZipInfo("docs/"), b"")
    zf.writestr("docs/a.md", b"# A\n", compress_type=zipfile.ZIP_DEFLATED)
    zf.writestr("stored.txt", b"stored, not deflated\n", compress_type=zipfile.ZIP_STORED)
    zf.writestr("readme.txt", b"readme\n", compress_type=zipfile.ZIP_DEFLATED)
write("plain.zip", plain.getvalue())

write("demo-1.0-py3.11.egg", zip_bytes([
    ("EGG-INFO/PKG-INFO", b"Metadata-Version: 1.1\nName: demo\n"),
    ("demo/__init__.py", b"VERSION = '1.0'\n"),
]))

sdist_members = [
    ("demo-1.0/", None),
    ("demo-1.0/setup.py", b"from setuptools import setup\nsetup()\n"),
    ("demo-1.0/PKG-INFO", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"),
    ("demo-1.0/link", (tarfile.SYMTYPE, "setup.py")),
    ("./demo-1.0/" + "long/" * 30 + "deep.txt", b"a long pax path\n"),
]
write("demo-1.0.tar", tar_bytes(sdist_members))
sdist_gz = tar_bytes(sdist_members, "w:gz")
write("demo-1.0.tar.gz", sdist_gz)
write("demo-1.0.tgz", sdist_gz)
write("demo-1.0.tar.xz", tar_bytes(sdist_members, "w:xz"))
write("demo-1.0.tar.bz2", tar_bytes(sdist_members, "w:bz2"))

inner_tar = tar_bytes([("inner/notes.txt", b"inside a tar inside a tar.gz\n")])
write("outer.zip", zip_bytes([
    ("inner/demo-1.0.tar.gz", sdist_gz),
    ("pkg.whl", wheel),
    ("readme.txt", b"outer\n"),
]))
write("outer.tar.gz", tar_bytes([
    ("outer/", None),
    ("outer/wheels/demo-1.0-py3-none-any.whl", wheel),
    ("outer/inner.tar", inner_tar),
], "w:gz"))

# Nesting: l1.zip!/l2.zip!/l3.zip!/l4.zip!/deepest.txt, with a file at every level.
level = zip_bytes([("deepest.txt", b"level 4\n")])
for n in (4, 3, 2, 1):
    level = zip_bytes([(f"l{n}.zip", level), (f"at{n - 1}.txt", f"level {n - 1}\n".encode())])
write("deep.zip", level)

# Decompression bombs.
with zipfile.ZipFile(path("bomb.zip"), "w", zipfile.ZIP_DEFLATED) as zf:
    with zf.open("zeros.bin", "w", force_zip64=True) as f:
        chunk = b"\0" * (1024 * 1024)
        for _ in range(200):
            f.write(chunk)
    zf.writestr("inner.tar", tar_bytes([("zeros.bin", b"\0" * (100 * 1024 * 1024))]))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tf:
    info = tarfile.TarInfo("zeros.bin")
    info.size = 200 * 1024 * 1024

    class Zeros(io.RawIOBase):
        def __init__(self, n):
            self.left = n

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), self.left)
            b[:n] = b"\0" * n
            self.left -= n
            return n

    tf.addfile(info, io.BufferedReader(Zeros(info.size)))
write("bomb.tar.gz", buf.getvalue())


def patch_central(data, name, offset, fmt, value):
    """Overwrites a field of the central directory header of `name`."""
    i = data.find(b"PK\x01\x02" + b"", 0)
    name_b = name.encode()
    while i != -1:
        n_len = struct.unpack_from("<H", data, i + 28)[0]
        if data[i + 46:i + 46 + n_len] == name_b:
            struct.pack_into(fmt, data, i + offset, value)
            return i
        i = data.find(b"PK\x01\x02", i + 4)
    raise SystemExit(f"no central header for {name}")


# A nested zip that claims to be almost 4 GiB.
huge = bytearray(zip_bytes([("huge.zip", zip_bytes([("x.txt", b"x" * 1000)])), ("ok.txt", b"ok\n")]))
patch_central(huge, "huge.zip", 24, "<I", 0xFFFFFFF0)
write("huge-claim.zip", bytes(huge))

# Encrypted member: the flag set on a deflated member (we never get as far as decrypting).
enc = bytearray(zip_bytes([("secret.txt", b"secret " * 100), ("public.txt", b"public\n")]))
i = patch_central(enc, "secret.txt", 8, "<H", 0x0001)
local = struct.unpack_from("<I", enc, i + 42)[0]
struct.pack_into("<H", enc, local + 6, 0x0001)
write("encrypted.zip", bytes(enc))

# Many members.
with zipfile.ZipFile(path("many.zip"), "w", zipfile.ZIP_STORED) as zf:
    for n in range(100_000):
        zf.writestr(f"m/{n:06d}.txt", b"")

# Unsafe names, duplicates, links.
import warnings
warnings.simplefilter("ignore")
with zipfile.ZipFile(path("traversal.zip"), "w") as zf:
    for name in ["../evil.txt", "/abs.txt", "a\\b.txt", "C:/win.txt", "dup.txt", "dup.txt", "ok.txt"]:
        zf.writestr(zipfile.ZipInfo(name), b"x\n")
    link = zipfile.ZipInfo("escape")
    link.create_system = 3
    link.external_attr = (0o120777 << 16)
    zf.writestr(link, b"../../etc/passwd")
write("traversal.tar", tar_bytes([
    ("../evil.txt", b"x\n"),
    ("/abs.txt", b"x\n"),
    ("escape", (tarfile.SYMTYPE, "../../etc/passwd")),
    ("abs-link", (tarfile.SYMTYPE, "/etc/passwd")),
    ("ok.txt", b"fine\n"),
    ("ok-link", (tarfile.SYMTYPE, "ok.txt")),
    ("hard", (tarfile.LNKTYPE, "ok.txt")),
    ("fifo", (tarfile.FIFOTYPE, "")),
    ("dup.txt", b"one\n"),
    ("dup.txt", b"two\n"),
]))

# Truncated and corrupt.
write("truncated.zip", wheel[: len(wheel) // 2])
write("truncated.tar.gz", sdist_gz[: len(sdist_gz) // 2])
write("truncated.tar", tar_bytes(sdist_members)[:1500])
corrupt = bytearray(wheel)
start = wheel.find(b"demo/big.txt") + 200  # inside big.txt's deflate data
# Fixed bytes, not random ones: some random runs inflate cleanly far past where the suite reads.
corrupt[start:start + 64] = b"\xff" * 64
write("corrupt-member.zip", bytes(corrupt))
write("garbage.zip", os.urandom(4096))
write("garbage.tar.gz", b"\x1f\x8b" + os.urandom(4096))
write("garbage.tar", os.urandom(4096))
write("empty.zip", zip_bytes([]))
