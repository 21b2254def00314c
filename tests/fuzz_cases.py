"""Hostile inputs for tests/test_fuzz.py, generated from a table of derive's commands and their options.

A new command is one row of COMMANDS: its ``main(argv) -> int``, its program name,
its options with a few plausible values each (a list; FLAG for a switch, PATH_CONFIG
or PATH_OUT for a file it reads or a folder it writes) and how many cases a fast run
draws. Every value is drawn from a seeded random.Random, so a run is reproducible;
DERIVE_FUZZ_SCALE multiplies the counts (CI's slower variant: DERIVE_FUZZ_SCALE=10).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import re
import resource
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from derive.check import main as check_main
from derive.options.report import SHAPE_OPTIONS
from derive.cli import main as report_main
from derive.comm import main as comm_main
from derive.hf import published_config, published_names
from derive.inputs import MAX_NESTING, MAX_SIZE
from derive.plan import main as plan_main
from derive.predict import main as predict_main
from derive.render.__main__ import main as render_main

#: The slower variant's multiplier of every count (1: the fast run the suite always makes).
SCALE = int(os.environ.get("DERIVE_FUZZ_SCALE", "1"))
#: No run of a command may compute longer, in this process's CPU seconds (a hang, not a speed figure:
#: speed lives in bench/). CPU time, not wall time, so a loaded machine does not turn a slow run into a
#: finding; a run that blocks without computing (a FIFO read) is caught by the wall-clock bound below.
HANG_SECONDS = 10
#: Wall-clock seconds after which a run that waits (blocked on a read, sleeping) is a hang.
BLOCKED_SECONDS = 60
#: Address space a run may add: a memory bomb is a MemoryError (a finding), not a machine out of memory.
SPARE_BYTES = 4 * 2**30
FLAG, PATH_CONFIG, PATH_OUT = "flag", "config path", "out path"

#: Hostile text any option may meet: out of range, not numbers, huge, tiny, other scripts, markup.
NASTY = ["", " ", "0", "-1", "-0", "1.5", "1e400", "1e-300", "5e-324", "nan", "inf", "-inf", "abc",
         "0x10", "9" * 40, "2", "8", "70GiB", "-70GiB", "0.0001KB", "h100", "H200", "\u0661\u0662",
         "None", "True", "3", "1024", "4194304", "llama3-70b", "<b>x</b>", "'", "\\", "\x00",
         "\u202e", "\ufeff8", "8\u2003", "1_000", "+8", "\n8", "--json", "-", "=", "%s%n"]
#: Integers at the edges derive checks: 2^k - 1, 2^k, 2^k + 1.
EDGES = [2**k + delta for k in (10, 20, 24, 31, 32, 47, 48, 53, 63, 64, 100) for delta in (-1, 0, 1)]


@dataclass(frozen=True)
class Command:
    """One command of derive: how to run it and which options to draw."""

    main: Callable[[list[str]], int]
    prog: str
    options: dict[str, object]
    cases: int
    #: Options given in most cases, so the others meet their own checks past the required ones.
    usual: dict[str, str] = field(default_factory=dict)


#: The layout options comm and predict share (derive.options), with plausible values.
LAYOUT_OPTIONS: dict[str, object] = {
    "--model": ["8b", "70b", "mixtral-8x7b", "deepseek-v3", "llama9"], "--config": PATH_CONFIG,
    "--seq": ["4096", "8192"], "--tp": ["1", "2", "8"], "--pp": ["1", "4"], "--vp": ["2"], "--cp": ["2"],
    "--ep": ["2", "8"], "--etp": ["1"], "--dp": ["4", "8"], "--gpus": ["64", "1024"],
    "--micro-batch": ["1", "2"], "--global-batch": ["64", "512"],
    "--precision": ["bf16", "fp16", "fp8-current", "mxfp8", "fp8"], "--zero": ["0", "1", "3"],
    "--sequence-parallel": FLAG, "--recompute": ["none", "selective", "full"],
    "--cp-comm": ["p2p", "all_gather"], "--scatter-gather": FLAG, "--algorithm": ["ring", "tree", "nvls"],
    "--capacity-factor": ["1.25", "0"], "--dp-shard": ["2"], "--no-sp-regather": FLAG,
    "--no-reshard-after-forward": FLAG, "--balanced": FLAG, "--fp8-param-gather": FLAG,
}

COMMANDS: dict[str, Command] = {
    "report": Command(report_main, "derive", {
        "--model": ["8b", "70b", "405b", "175b", "1.3b", "llama9", "gpt3-175b"],
        "--config": PATH_CONFIG,
        "--precision": ["bf16", "fp16", "bf16-fp32grad", "fp16-megatron", "fp8"],
        "--optimizer": ["adam", "sgd", "adam-8bit", "lion"],
        "--micro-batch": ["1", "8", "65536"], "--tokens": ["4194304"], "--gpus": ["1024"],
        "--peak": ["h100", "a100", "1.5e15", "tpu"], "--mfu": ["0.4", "1", "1e-300"],
        "--step-time": ["4.5", "0.01", "1e16"],
        "--profile": ["article", "gpt", "llama-eager", "llama-fused", "mamba"],
        "--zero": ["0", "1", "2", "3", "4"], "--dp": ["8"], "--budget": ["80GB", "h100", "a100"],
        **{option: ["64", "8192"] for option in SHAPE_OPTIONS.values()},
        "--moe": ["mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b", PATH_CONFIG],
        "--tp": ["2"], "--ep": ["8"], "--etp": ["1"], "--pp": ["4"], "--moe-profile": ["eager", "fused"],
        "--json": FLAG,
    }, cases=800),
    "plan": Command(plan_main, "derive.plan", {
        "--model": ["8b", "70b", "gpt3-1.3b"], "--config": PATH_CONFIG, "--gpus": ["8", "64", "12"],
        "--gpu": ["h100", "a100", "b200"], "--tokens": ["1048576", "4194304"],
        "--seq": ["4096", "8192"], "--profile": ["llama-fused", "gpt", "article"],
        "--placement": ["megatron", "deepspeed-zero3", "torchtitan-fsdp2", "fsdp2"], "--mfu": ["0.5", "1e-300"],
        "--max-cp": ["1", "4"], "--top": ["3"], "--json": FLAG,
    }, cases=120, usual={"--model": "8b", "--gpus": "8", "--tokens": "1048576"}),
    "check": Command(check_main, "python -m derive.check", {
        "--json": FLAG, "--claims": FLAG,
        "--document": ["the article", "Korthikanti et al. 2022", "Nobody 1999"],
    }, cases=20),
    "render": Command(render_main, "python -m derive.render", {"--out": PATH_OUT}, cases=60),
    "comm": Command(comm_main, "python -m derive.comm", {**LAYOUT_OPTIONS, "--json": FLAG},
                    cases=120, usual={"--model": "70b", "--tp": "8", "--dp": "4"}),
    "predict": Command(predict_main, "python -m derive.predict", {
        **LAYOUT_OPTIONS, "--gpu": ["h100", "a100-80gb", "b200", "tpu"],
        "--architecture": ["layers=2,hidden=64,ffn=128,heads=4,kv-heads=2,vocab=100,mlp=swiglu", "layers=0"],
        "--overlap": ["none", "tp-comm-overlap", "dp-reduce-with-backward,nothing"],
        "--no-sequence-parallel": FLAG, "--no-memory-check": FLAG, "--json": FLAG,
        "--expert-op-fuser": FLAG, "--recompute-modules": ["moe_act", "layernorm,moe_act", "core_attn", ","],
    }, cases=120, usual={"--model": "8b", "--gpu": "h100", "--dp": "8", "--zero": "1"}),
}


def hostile_text(rng: random.Random) -> str:
    """Text no option should take as given: edges, floats far out, random characters, NASTY."""
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice(NASTY)
    if kind == 1:
        return str(rng.choice(EDGES) * rng.choice((1, 1, -1)))
    if kind == 2:
        return repr(rng.choice([float(f"{rng.uniform(1, 10):.3f}e{rng.randint(-330, 330)}"), math.nan, math.inf,
                                -0.0, 5e-324]))
    if kind == 3:
        return str(int(10 ** rng.uniform(0, 20)))
    alphabet = "0123456789.eE+-_ kKMGTiB\u00a0\u0663\uff18xyz/\\\"'<>{}[]"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))


def hostile_configs(folder: Path, rng: random.Random, count: int) -> list[str]:
    """Config files of every hostile kind in ``folder``: mutated published configs, too deep, not files."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        config = published_config(rng.choice(published_names()))
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(sorted(config))
            config[key] = rng.choice([2**52, 2**53, 2**53 + 1, 2**48, 10**12, -1, 0, 1.5, "8", None,
                                      [8], {"a": 1}, True, math.nan, math.inf, 1e308, "\u00e9"])
        path = folder / f"config{index}.json"
        path.write_text(json.dumps(config))
        paths.append(str(path))
    deep = folder / "deep.json"
    deep.write_text('{"model_type": "llama", "x": ' + "[" * 50_000 + "]" * 50_000 + "}")
    edge = folder / "edge.json"
    edge.write_text('{"model_type": "llama", "x": ' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}")
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    (folder / "folder").mkdir()
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00{")
    (folder / "list.json").write_text("[1, 2]")
    return paths + [str(p) for p in (deep, edge, fifo, folder / "folder", folder / "binary.json",
                                     folder / "list.json", folder / "missing.json")] + ["/dev/zero"]


def out_paths(folder: Path) -> list[str]:
    """Folders --out may be pointed at: new, nested, a user's file, a user's folder, a link, a device."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mine.txt").write_text("mine")
    (folder / "docs").mkdir(exist_ok=True)
    (folder / "docs" / "notes.md").write_text("notes")
    if not (folder / "link").exists():
        (folder / "link").symlink_to(folder / "docs")
    names = ["new", "new/deeper/still", "mine.txt", "docs", "link", "mine.txt/inside", "", ".",
             "bad\x00name", "x" * 300]
    return [str(folder / name) for name in names] + ["/dev/null"]


def draw_argv(rng: random.Random, command: Command, paths: dict[str, list[str]]) -> list[str]:
    """One command line: a few of the command's options, each with a plausible or a hostile value."""
    argv = [f"{option}={value}" for option, value in command.usual.items() if rng.random() < 0.8]
    for option in rng.sample(sorted(command.options), k=min(len(command.options), rng.randint(0, 4))):
        values = command.options[option]
        if values == FLAG:
            argv.append(option)
            continue
        kinds = [values] if isinstance(values, str) else [v for v in values if v in (PATH_CONFIG, PATH_OUT)]
        plain = [] if isinstance(values, str) else [v for v in values if v not in (PATH_CONFIG, PATH_OUT)]
        if kinds and rng.random() < 0.7:
            value = rng.choice(paths[rng.choice(kinds)])
        elif plain and rng.random() < 0.5:
            value = rng.choice(plain)
        else:
            value = hostile_text(rng)
        argv.append(f"{option}={value}")
    rng.shuffle(argv)
    return argv


class Hang(Exception):
    """A command computed past HANG_SECONDS of CPU or waited past BLOCKED_SECONDS of wall time."""


def _alarm(signum, frame):
    raise Hang(f"over {HANG_SECONDS} s of CPU" if signum == signal.SIGPROF else f"blocked over {BLOCKED_SECONDS} s")


def run_main(main: Callable[[list[str]], int], argv: list[str]) -> tuple[object, str, str]:
    """(exit status, stdout, stderr) of ``main(argv)`` in process; an escaping exception is the status."""
    out, err = io.StringIO(), io.StringIO()
    previous = {number: signal.signal(number, _alarm) for number in (signal.SIGALRM, signal.SIGPROF)}
    limits = resource.getrlimit(resource.RLIMIT_AS)
    try:  # Linux: the process's address space now; elsewhere no limit is set
        with open("/proc/self/statm") as statm:
            used = int(statm.read().split()[0]) * resource.getpagesize()
    except OSError:
        used = None
    if used is not None and (limits[1] == resource.RLIM_INFINITY or used + SPARE_BYTES < limits[1]):
        resource.setrlimit(resource.RLIMIT_AS, (used + SPARE_BYTES, limits[1]))
    signal.setitimer(signal.ITIMER_PROF, HANG_SECONDS)
    signal.setitimer(signal.ITIMER_REAL, BLOCKED_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as stop:
                status = stop.code
    except BaseException as error:  # a traceback or a hang: the finding itself
        status = error
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for number, handler in previous.items():
            signal.signal(number, handler)
        resource.setrlimit(resource.RLIMIT_AS, limits)
    return status, out.getvalue(), err.getvalue()


def tree(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (links not followed): its kind, size and modification time."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            info = path.lstat()
            found[str(path.relative_to(folder))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


#: A number's digits may run this long (2^53 has 16): longer is a number nobody can read.
LONGEST_DIGITS = 20
#: Units whose values are sizes or counts: never negative, never above this physical bound
#: (derive keeps every derived count at most 2^53; a plan's memory adds states and activations).
SIZE_BOUND = {"B": 2 * MAX_SIZE, "parameters": MAX_SIZE, "GPUs": MAX_SIZE, "FLOP/token": math.inf,
              "s": math.inf, "tokens/s": math.inf, "B/parameter": 64}


def problems_in_output(text: str, given: list[str] = ()) -> list[str]:
    """What is wrong with a command's printed output: NaN, infinity, impossible sizes, (text) unreadable numbers."""
    found = []
    try:
        data = json.loads(text, parse_constant=lambda name: found.append(f"JSON {name}"))
    except ValueError:
        data = None
    if data is not None:  # JSON is for programs: exact integers of any length are welcome there
        return found + problems_in_json(data)
    for part in given:  # the user's own text, echoed (a path, a name), is theirs to read
        text = text.replace(part.partition("=")[2] or part, "")
    words = re.split(r"[\s(),=:;]+", text)
    found += [f"word {w!r}" for w in words if w.lower() in {"nan", "inf", "-inf", "infinity"}]
    found += [f"digits {run[:30]}..." for run in re.findall(r"\d{%d,}" % (LONGEST_DIGITS + 1), text)]
    return found


def problems_in_json(data: object, unit: str | None = None, key: str = "") -> list[str]:
    """Non-finite numbers anywhere; sizes (by unit, or bytes / memory keys) negative or above their bound."""
    if isinstance(data, dict):
        if "value" in data and "unit" in data:
            return problems_in_json(data["value"], data["unit"], key)
        return [p for name, value in data.items() for p in problems_in_json(value, unit, name)]
    if isinstance(data, list):
        return [p for value in data for p in problems_in_json(value, unit, key)]
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        return []
    if not math.isfinite(data):
        return [f"{key} = {data}"]
    if key in ("memory_per_gpu", "usable_bytes", "low", "high") or key.endswith("_bytes"):
        unit = "B"
    if unit == "fraction" and key == "observed.mfu" and not 0 <= data <= 1:
        return [f"{key} = {data} (an MFU)"]
    if unit in SIZE_BOUND and not 0 <= data <= SIZE_BOUND[unit]:
        return [f"{key} = {data} {unit}"]
    return []
