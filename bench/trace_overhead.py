"""What `gradfix trace` costs: a script's first N optimizer steps with and without its hooks
(a script, not a test; timings depend on the machine).

Each script runs in a fresh interpreter, torch already imported, from its own folder, twice per
repetition: once under a bare optimizer step hook that stops it after N steps (its own time),
once under gradfix's recorder with the same stop. The best of the repetitions is reported.

    python bench/trace_overhead.py                 # examples/ and two corpus cases
    python bench/trace_overhead.py SCRIPT... --steps 5 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THREADS = ROOT / "bench" / "threads"
DEFAULT_SCRIPTS = (
    ROOT / "examples" / "train.py",
    ROOT / "examples" / "multitask.py",
    THREADS / "GF001" / "notebook_deep_linear_net_losses_append" / "before.py",
    THREADS / "GF002" / "gan_trainer_class_train_metrics_fed_live_fake" / "before.py",
)

# Times one run of the script in this fresh interpreter; prints {"seconds": ...}.
_TIMER = r"""
import json, runpy, sys, time
from pathlib import Path
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
script, steps, traced = Path(sys.argv[1]).resolve(), int(sys.argv[2]), sys.argv[3] == "1"
sys.argv = [str(script)]
sys.path.insert(0, str(script.parent))
class Stop(BaseException):
    pass
count = 0
def stop(*_):
    global count
    count += 1
    if count >= steps:
        raise Stop
def run():
    try:
        runpy.run_path(str(script), run_name="__main__")
    except Stop:
        pass
start = time.perf_counter()
if traced:
    from codemods.trace.recorder import Recorder, StopTracing
    recorder = Recorder(roots=(script.parent,), stop_after=steps)
    with recorder.installed():
        try:
            runpy.run_path(str(script), run_name="__main__")
        except StopTracing:
            pass
        except Exception:
            pass
    recorder.finish()
else:
    register_optimizer_step_post_hook(stop)
    try:
        run()
    except Exception:
        pass
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def time_once(script: Path, steps: int, traced: bool) -> float:
    completed = subprocess.run(
        [sys.executable, "-c", _TIMER, str(script), str(steps), "1" if traced else "0"],
        capture_output=True,
        text=True,
        cwd=script.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    last = completed.stdout.strip().splitlines()[-1]
    return float(json.loads(last)["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scripts", nargs="*", type=Path)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    scripts = [p.resolve() for p in args.scripts] or list(DEFAULT_SCRIPTS)
    print(f"| script | own time, first {args.steps} steps | under trace | ratio |")
    print("|---|---|---|---|")
    for script in scripts:
        own = min(time_once(script, args.steps, False) for _ in range(args.repeat))
        traced = min(time_once(script, args.steps, True) for _ in range(args.repeat))
        name = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
        print(f"| {name} | {own * 1000:.0f} ms | {traced * 1000:.0f} ms | {traced / own:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
