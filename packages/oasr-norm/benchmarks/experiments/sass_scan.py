"""Per-kernel SASS facts that explained two norm-family misses (session 20).

    python sass_scan.py KERNELS [NAME_SUBSTRING]

KERNELS is an object, cubin or binary (disassembled with cuobjdump: $CUOBJDUMP, or the CUDA
toolkit's, which the GPU machine has and nvcc-only installs lack) or the text cuobjdump -sass
printed (.sass / .txt). For each kernel whose mangled name holds NAME_SUBSTRING it prints:

- instructions: the kernel's length. Straight-line row kernels run about all of them per row, so
  length x rows / (SMs x 4 issue slots x clock) is a floor. Softmax over 250 keys was 232
  instructions a warp-row (27 a value), near bandwidth and issue at once.
- exp2 fixups: MUFU.EX2 guarded by a range test (FSETP against -126 and predicated multiplies):
  exp2f keeps subnormal results that way, four instructions for one.
- load waits: a global load whose value is used before a later load of the same kernel is
  issued, so the warp waits on it first. It mattered in a one-wave kernel (layer_norm at 8000
  rows: every warp's life is the kernel's time) and not where other warps hide the wait (masked
  softmax got slower when its loads were made unconditional).
"""

import os
import re
import shutil
import subprocess
import sys


def kernels(path: str) -> dict[str, list[str]]:
    """Mangled name -> its instructions, from cuobjdump -sass output."""
    if path.endswith((".sass", ".txt")):
        with open(path) as f:
            text = f.read()
    else:
        tool = (
            os.environ.get("CUOBJDUMP")
            or shutil.which("cuobjdump")
            or "/usr/local/cuda/bin/cuobjdump"
        )
        text = subprocess.run(
            [tool, "-sass", path], capture_output=True, text=True, check=True
        ).stdout
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        name = re.match(r"\s+Function : (\S+)", line)
        if name:
            current = found.setdefault(name.group(1), [])
        elif current is not None and re.search(r"/\*[0-9a-f]{4}\*/", line):
            current.append(re.sub(r"/\*[0-9a-f]{4}\*/", "", line).split(";")[0].strip())
    return found


def opcode(instruction: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", instruction).split()[0]


def registers(text: str) -> set[int]:
    return set(map(int, re.findall(r"(?<![A-Z])R(\d+)", text)))


def written(instruction: str) -> list[int]:
    """The registers a load writes (a 64- or 128-bit load writes 2 or 4)."""
    body = re.sub(r"^@!?U?P\w+\s+", "", instruction)
    first = re.match(r"\S+\s+R(\d+)", body)
    if not first:
        return []
    width = 4 if ".128" in body.split()[0] else 2 if ".64" in body.split()[0] else 1
    return list(range(int(first.group(1)), int(first.group(1)) + width))


def read(instruction: str) -> set[int]:
    body = re.sub(r"^@!?U?P\w+\s+", "", instruction)
    operands = body[len(body.split()[0]) :]
    if opcode(instruction).startswith(("STG", "STS", "ST.", "RED", "ATOM")):
        return registers(operands)  # a store's operands are all read
    parts = operands.split(",", 1)
    return registers(parts[1]) if len(parts) > 1 else set()


def load_waits(code: list[str]) -> list[tuple[int, int, int]]:
    """(load, first use, next load) where the use comes before the next load is issued."""
    waits = []
    for i, instruction in enumerate(code):
        if not opcode(instruction).startswith("LDG"):
            continue
        loaded = set(written(instruction))
        for j in range(i + 1, len(code)):
            if opcode(code[j]) in ("EXIT", "RET", "CALL"):
                break
            if read(code[j]) & loaded:
                later = [
                    k
                    for k in range(j + 1, min(len(code), j + 60))
                    if opcode(code[k]).startswith("LDG")
                ]
                if later:
                    waits.append((i, j, later[0]))
                break
    return waits


def exp2_fixups(code: list[str]) -> int:
    return sum(1 for c in code if opcode(c).startswith("FSETP") and "-126" in c)


def main(path: str, substring: str = "") -> None:
    for name, code in kernels(path).items():
        if substring not in name:
            continue
        waits = load_waits(code)
        counts = f"instructions {len(code)}, exp2 fixups {exp2_fixups(code)}"
        print(f"{name}\n  {counts}, load waits {len(waits)}")
        for load, use, later in waits[:4]:
            print(
                f"    {load}: {code[load]}\n      used at {use} ({code[use]}), next load at {later}"
            )


if __name__ == "__main__":
    main(*sys.argv[1:3])
