#!/usr/bin/env python3
"""Instructions and locked instructions per request, thread by thread, of one
`purgatory_perf` run under valgrind's callgrind.

Timings on a shared machine move by a tenth from one run to the next;
these counts by under 1% on a quiet machine, a few percent beside a busy
job (callgrind counts what each thread executes; the order valgrind runs
the threads in changes only what they wait for and retry). They show
where a change adds or removes work, not what it costs: a load that
misses a cache counts as one instruction. Locked instructions (a `lock`
prefix, `xchg` with memory, `mfence`) are counted apart, since each is a
full barrier on x86: a few nanoseconds even uncontended, and it waits
for the thread's earlier stores to reach the cache.

    cargo bench --profile bench-lto --bench purgatory_perf --no-run
    python3 benches/purgatory_perf/instructions.py \
        target/bench-lto/deps/purgatory_perf-HASH --impl wheel --rate 20000 --num 40000

Counts are divided by `--num`. Valgrind runs one thread at a time, about
50 times slower, so keep the rate low: the counts are those of the
uncontended paths. Needs valgrind and objdump (binutils).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

# What each thread is: the first role, in this order, whose function (or,
# for code inlined out of sight, source file) the thread ran.
ROLES = [
    ("generator", "purgatory_perf::main"),
    ("completer", "complete_until"),
    ("purgatory thread", "purgatory::purgatory::threads::"),
    ("floor-expiry", "purgatory_perf/floor.rs"),
]


def locked_addresses(binary):
    """Addresses of the binary's locked instructions, as objdump shows them."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", binary],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    addresses = set()
    for line in out.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\t(.*)", line)
        # `xchg` with memory is locked; between registers (a two-byte
        # `xchg %ax,%ax` is a padding nop) it is not.
        insn = m.group(2) if m else ""
        if re.match(r"(lock |mfence)", insn) or (
                insn.startswith("xchg") and "(" in insn):
            addresses.add(int(m.group(1), 16))
    return addresses


def read_thread(path, binary_name, locked):
    """(instructions, locked instructions, role) of one callgrind thread file.

    Positions are `instr line` (`--dump-instr=yes`); a position may be
    absolute, relative to the last one (`+n`, `-n`) or the same (`*`). The
    line after `calls=` is a call's inclusive cost and is not counted.
    """
    names = {"fn": {}, "ob": {}, "fl": {}}
    files = set()
    obj = None
    last = 0
    skip = False
    total = 0
    locks = 0
    executed = set()
    with open(path) as f:
        for line in f:
            # A name is given with its id once, in whichever line first
            # uses the id (`cfn=` and the like name what is called).
            m = re.match(r"(c?)(fn|ob|fl|fi|fe)=\((\d+)\)(?: (.*))?", line)
            if m:
                called, kind, id_ = m.group(1), m.group(2), m.group(3)
                table = names["fl" if kind in ("fi", "fe") else kind]
                if m.group(4):
                    table[id_] = m.group(4).strip()
                if not called and kind == "fn":
                    executed.add(id_)
                elif not called and kind == "ob":
                    obj = table.get(id_, "")
                elif not called and kind != "fn":
                    files.add(id_)
                continue
            if line.startswith("calls="):
                skip = True
                continue
            if not line[:1] in "0+-*":
                continue
            parts = line.split()
            p = parts[0]
            if p.startswith("0x"):
                last = int(p, 16)
            elif p.startswith("+"):
                last += int(p[1:])
            elif p.startswith("-"):
                last -= int(p[1:])
            if skip:
                skip = False
                continue
            if len(parts) < 3:
                continue
            cost = int(parts[2])
            total += cost
            if obj and obj.endswith(binary_name) and last in locked:
                locks += cost
    seen = [names["fn"].get(i, "") for i in executed]
    seen += [names["fl"].get(i, "") for i in files]
    role = next((r for r, f in ROLES if any(f in name for name in seen)), "other")
    return total, locks, role


def requests(args):
    """The run's `--num`, which the counts are divided by."""
    value = "1000000"  # the bench's default
    for i, a in enumerate(args):
        if a == "--num" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--num="):
            value = a.split("=", 1)[1]
    if not value.isdigit() or int(value) == 0:
        sys.exit(f"--num {value}: a positive whole number is needed")
    return int(value)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary, args = sys.argv[1], sys.argv[2:]
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        sys.exit(f"{binary}: not an executable (the bench binary, not its .d file)")
    for tool in ("valgrind", "objdump"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: it is needed to count")
    num = requests(args)
    locked = locked_addresses(binary)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-instr=yes",
             "--separate-threads=yes", f"--callgrind-out-file={out}",
             binary, *args],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            # The bench's own words, without valgrind's `==pid==` lines.
            said = [l for l in run.stderr.splitlines() if not l.startswith("==")]
            sys.exit("the run under valgrind failed:\n" + "\n".join(said[-30:]))
        print(run.stdout.strip())
        print(f"per request (--num {num}):")
        for name in sorted(os.listdir(tmp)):
            total, locks, role = read_thread(
                os.path.join(tmp, name), os.path.basename(binary), locked)
            if total < num:  # threads that hardly ran
                continue
            print(f"  {role:<17} {total / num:8.0f} instructions"
                  f"  {locks / num:6.2f} locked")


if __name__ == "__main__":
    main()
