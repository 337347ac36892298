"""Is an ELF file complete? A shared library is checked before every load, an object file
before a resumed build reuses it.

``dlopen`` of a truncated library does not raise: the process dies with SIGBUS when it touches
a page past the end of the file. A file is complete when it holds every byte its ELF header,
program headers and section headers describe; a shared library has program headers, an object
file (``ET_REL``) has none.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

_SHT_NOBITS = 8  # .bss and friends occupy no file bytes
_ET_REL = 1


def is_complete_shared_object(path: Path | str) -> bool:
    """True when ``path`` is an ELF file with program headers whose headers and described
    contents all fit in it."""
    return _complete_elf(path, relocatable=False)


def is_complete_object_file(path: Path | str) -> bool:
    """True when ``path`` is an ELF relocatable object (a compiler's ``.o``) whose headers and
    sections all fit in it."""
    return _complete_elf(path, relocatable=True)


def _complete_elf(path: Path | str, *, relocatable: bool) -> bool:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            ident = f.read(16)
            if len(ident) < 16 or ident[:4] != b"\x7fELF":
                return False
            is64 = ident[4] == 2
            endian = "<" if ident[5] == 1 else ">"
            if is64:
                header = f.read(48)
                if len(header) < 48:
                    return False
                (e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = (
                    struct.unpack(endian + "HHIQQQIHHHHHH", header)
                )
            else:
                header = f.read(36)
                if len(header) < 36:
                    return False
                (e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = (
                    struct.unpack(endian + "HHIIIIIHHHHHH", header)
                )
            if relocatable and (e_type != _ET_REL or shnum == 0):
                return False
            if phoff + phentsize * phnum > size or shoff + shentsize * shnum > size:
                return False
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                entry = table[i * phentsize : (i + 1) * phentsize]
                if is64:
                    _, _, offset, _, _, filesz, _, _ = struct.unpack(endian + "IIQQQQQQ", entry)
                else:
                    _, offset, _, _, filesz, _, _, _ = struct.unpack(endian + "IIIIIIII", entry)
                if offset + filesz > size:
                    return False
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            for i in range(shnum):
                entry = table[i * shentsize : (i + 1) * shentsize]
                if is64:
                    _, kind, _, _, offset, sec_size = struct.unpack(endian + "IIQQQQ", entry[:40])
                else:
                    _, kind, _, _, offset, sec_size = struct.unpack(endian + "IIIIII", entry[:24])
                if kind != _SHT_NOBITS and offset + sec_size > size:
                    return False
            return relocatable or phnum > 0
    except OSError:
        return False
