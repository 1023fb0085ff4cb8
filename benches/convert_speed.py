"""Speed and memory of the conversion (Claude Code / Codex -> Pi) against ``pigz -1 -p 2``.

    python benches/convert_speed.py gen claude-code|codex OUT --megabytes N   # a large file
    python benches/convert_speed.py run FILE [--repeat 3]                     # measure

``gen`` writes a transcript of about N MB in the agent's format, shaped like the fixtures:
Claude Code user/assistant lines (text, thinking, tool_use, tool_result), progress and system
lines, a /rewind fork every 500 lines; Codex turn_context, response_item messages, reasoning,
function calls and outputs, token_count events. Deterministic (seeded).

``run`` measures, in one run on the same file (the page cache warmed by a first read):

* ``pigz``: ``pigz -1 -p 2 -c FILE > OUT.gz`` (the floor the target names), its output written
  to a file in the same folder as the conversion's (the same disk, like for like: both read the
  file and write their output to a file; neither output is read back); ``pigz_null``: the same
  with the output thrown away (``> /dev/null``, the floor of the figures before session 12);
* ``convert``: ``sessiontree.convert.to_pi(FILE, OUT)`` in a child process (two streaming
  passes, the Pi file written and fsynced), its peak RSS from ``getrusage``;
* ``memory``: ``sessiontree.convert.to_pi_bytes(data)`` in that child (the same conversion with
  nothing written: the file's bytes already read);
* CPU seconds of each (pigz's from ``RUSAGE_CHILDREN``, the conversion's ``process_time``, every
  thread): on a loaded machine wall times measure the scheduler, CPU times the work;

and prints each time (best of ``--repeat``), the ratios convert/pigz (wall and CPU), and peak
RSS as a share of the file's size, and the bytes the conversion read from the disk
(``/proc/self/io`` ``read_bytes``: 0 when the source stayed in the page cache). The Pi file is
about twice the source (every entry carries its source line), written and fsynced (the
conversion's atomic write); pigz's ``.gz`` (about a fifth of the source) is written, not
fsynced, as ``pigz`` does. The CI check at a small size is ``tests/perf/test_convert_ratio.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = "the quick brown fox jumps over a lazy dog while tests run and files change in place".split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def gen_claude_code(out: Path, megabytes: float, seed: int = 1) -> None:
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    size = 0
    parent = None
    n = 0
    ts = "2025-07-01T10:00:00.000Z"
    with open(out, "w") as f:
        while size < target:
            n += 1
            uuid = f"{n:08x}-0000-4000-8000-{n:012x}"
            base = {
                "parentUuid": parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/work/project",
                "sessionId": "bench-session",
                "version": "2.1.0",
                "gitBranch": "main",
                "uuid": uuid,
                "timestamp": ts,
            }
            k = n % 6
            if k == 1:
                base.update(type="user", message={"role": "user", "content": _text(rng, rng.randint(5, 60))})
            elif k == 2:
                base.update(
                    type="assistant",
                    requestId=f"req_{n}",
                    message={
                        "id": f"msg_{n}",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-20250514",
                        "content": [
                            {"type": "thinking", "thinking": _text(rng, 40), "signature": "sig" * 20},
                            {"type": "text", "text": _text(rng, rng.randint(20, 200))},
                            {
                                "type": "tool_use",
                                "id": f"toolu_{n}",
                                "name": "Bash",
                                "input": {"command": "ls -la " + _text(rng, 3)},
                            },
                        ],
                        "stop_reason": "tool_use",
                        "usage": {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 9000},
                    },
                )
            elif k == 3:
                base.update(
                    type="user",
                    toolUseResult={"stdout": _text(rng, 30), "stderr": ""},
                    message={
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": f"toolu_{n - 1}",
                                "content": _text(rng, rng.randint(50, 400)),
                                "is_error": False,
                            }
                        ],
                    },
                )
            elif k == 4:
                base.update(type="progress", data={"type": "hook_progress", "hookName": "PostToolUse"})
            elif k == 5:
                base.update(
                    type="assistant",
                    message={
                        "id": f"msg_{n}",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-20250514",
                        "content": [{"type": "text", "text": _text(rng, 80)}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 900, "output_tokens": 120},
                    },
                )
            else:
                base.update(type="system", subtype="turn_duration", durationMs=1234, isMeta=False)
            line = json.dumps(base, separators=(",", ":")) + "\n"
            f.write(line)
            size += len(line)
            # a /rewind now and then: the next line forks from an older one
            parent = uuid if n % 500 else f"{n - 3:08x}-0000-4000-8000-{n - 3:012x}"


def gen_codex(out: Path, megabytes: float, seed: int = 1) -> None:
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    ts = "2025-10-31T17:00:00.000Z"
    with open(out, "w") as f:
        size = f.write(
            json.dumps(
                {
                    "timestamp": ts,
                    "type": "session_meta",
                    "payload": {
                        "id": "bench-rollout",
                        "timestamp": ts,
                        "cwd": "/work/project",
                        "originator": "codex_cli_rs",
                        "cli_version": "0.60.0",
                        "source": "cli",
                        "git": {"branch": "main", "commit_hash": "abc"},
                    },
                }
            )
            + "\n"
        )
        n = 0
        while size < target:
            n += 1
            k = n % 6
            if k == 0:
                line = {
                    "type": "turn_context",
                    "payload": {"cwd": "/work/project", "model": "gpt-5", "effort": "medium"},
                }
            elif k == 1:
                line = {
                    "type": "response_item",
                    "payload": {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": _text(rng, rng.randint(5, 60))}],
                    },
                }
            elif k == 2:
                line = {
                    "type": "response_item",
                    "payload": {
                        "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": _text(rng, 40)}],
                        "encrypted_content": "enc" * 40,
                    },
                }
            elif k == 3:
                line = {
                    "type": "response_item",
                    "payload": {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": json.dumps({"command": ["bash", "-lc", _text(rng, 5)]}),
                        "call_id": f"call_{n}",
                    },
                }
            elif k == 4:
                line = {
                    "type": "response_item",
                    "payload": {
                        "type": "function_call_output",
                        "call_id": f"call_{n - 1}",
                        "output": json.dumps(
                            {"output": _text(rng, rng.randint(50, 400)), "metadata": {"exit_code": 0}}
                        ),
                    },
                }
            else:
                line = {
                    "type": "event_msg",
                    "payload": {
                        "type": "token_count",
                        "info": {
                            "last_token_usage": {
                                "input_tokens": 12000,
                                "cached_input_tokens": 10000,
                                "output_tokens": 300,
                                "total_tokens": 12300,
                            }
                        },
                    },
                }
            line = {"timestamp": ts, **line}
            size += f.write(json.dumps(line, separators=(",", ":")) + "\n")


def measure(path: Path, repeat: int = 3, out_dir: Path | None = None) -> dict:
    """Best-of-``repeat`` times of pigz and the conversion on ``path``, and the peak RSS; the
    outputs written in a temporary folder in ``out_dir`` (default: beside ``path``)."""
    size = path.stat().st_size
    with open(path, "rb") as f:  # warm the page cache
        while f.read(8 << 20):
            pass
    pigz = shutil.which("pigz")
    best_pigz = best_conv = best_null = float("inf")
    cpu_pigz = cpu_conv = cpu_null = mem_wall = mem_cpu = float("inf")
    rss = 0
    disk_read = 0
    # the outputs go beside the source (the same disk for both contenders), or to --out-dir
    with tempfile.TemporaryDirectory(dir=out_dir or path.parent) as d:
        out = Path(d) / "out.jsonl"
        gz = Path(d) / "out.jsonl.gz"
        code = (
            "import resource,sys,time\nfrom sessiontree import convert\nt=time.perf_counter();c=time.process_time()\n"
            f"convert.to_pi({str(path)!r}, {str(out)!r})\n"
            "w=time.perf_counter()-t;cpu=time.process_time()-c\n"
            "rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "io=dict(l.split(': ') for l in open('/proc/self/io').read().split('\\n') if l)\n"
            f"data=open({str(path)!r},'rb').read();t=time.perf_counter();c=time.process_time()\n"
            "pi,_=convert.to_pi_bytes(data)\n"
            "print(w, rss, cpu, time.perf_counter()-t, time.process_time()-c, io['read_bytes'])"
        )
        base = subprocess.run(
            [
                sys.executable,
                "-c",
                "import resource;import sessiontree.convert;print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        base_rss = int(base.stdout.split()[0])

        def run_pigz(target: str) -> tuple[float, float]:
            import resource

            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            with open(target, "wb") as o:
                subprocess.run([pigz, "-1", "-p", "2", "-c", str(path)], stdout=o, check=True)
            wall = time.perf_counter() - t
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            return wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime

        for _ in range(repeat):
            if pigz:
                w, c = run_pigz(str(gz))
                gz.unlink()
                best_pigz, cpu_pigz = min(best_pigz, w), min(cpu_pigz, c)
                w, c = run_pigz(os.devnull)
                best_null, cpu_null = min(best_null, w), min(cpu_null, c)
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            out.unlink()
            secs, peak, cpu, mwall, mcpu, rb = r.stdout.split()
            disk_read = max(disk_read, int(rb))
            best_conv = min(best_conv, float(secs))
            cpu_conv = min(cpu_conv, float(cpu))
            mem_wall = min(mem_wall, float(mwall))
            mem_cpu = min(mem_cpu, float(mcpu))
            rss = max(rss, int(peak))
    return {
        "bytes": size,
        "pigz_s": best_pigz,
        "convert_s": best_conv,
        "ratio": best_conv / best_pigz if pigz else None,
        "pigz_cpu_s": cpu_pigz if pigz else None,
        "convert_cpu_s": cpu_conv,
        "cpu_ratio": cpu_conv / cpu_pigz if pigz else None,
        "pigz_null_s": best_null if pigz else None,
        "pigz_null_cpu_s": cpu_null if pigz else None,
        "convert_disk_read_bytes": disk_read,
        "memory_s": mem_wall,
        "memory_cpu_s": mem_cpu,
        "peak_rss_kib": rss,
        "interpreter_rss_kib": base_rss,
        "rss_share": (rss - base_rss) * 1024 / size,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("format", choices=("claude-code", "codex"))
    g.add_argument("out")
    g.add_argument("--megabytes", type=float, default=100)
    r = sub.add_parser("run")
    r.add_argument("file")
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--out-dir", default=None, help="where both outputs go (default: beside FILE)")
    a = ap.parse_args()
    if a.cmd == "gen":
        (gen_claude_code if a.format == "claude-code" else gen_codex)(Path(a.out), a.megabytes)
    else:
        m = measure(Path(a.file), a.repeat, Path(a.out_dir) if a.out_dir else None)
        print(json.dumps(m))
        print(
            f"{m['bytes'] / 1e6:.0f} MB: pigz {m['pigz_s']:.2f} s, convert {m['convert_s']:.2f} s, "
            f"ratio {m['ratio']:.2f}x; CPU pigz {m['pigz_cpu_s']:.2f} s, convert {m['convert_cpu_s']:.2f} s, "
            f"ratio {m['cpu_ratio']:.2f}x; pigz to /dev/null {m['pigz_null_s']:.2f} s ({m['pigz_null_cpu_s']:.2f} s CPU); "
            f"read from disk {m['convert_disk_read_bytes'] / 1e6:.0f} MB; in memory {m['memory_s']:.2f} s ({m['memory_cpu_s']:.2f} s CPU); peak RSS {m['peak_rss_kib'] / 1024:.0f} MiB "
            f"({m['rss_share'] * 100:.1f}% of the file above the interpreter's {m['interpreter_rss_kib'] / 1024:.0f} MiB)"
        )


if __name__ == "__main__":
    main()
